/** API keys. (To be built.) */
export function ApiKeysPage() {
  return (
    <section>
      <h1>API keys</h1>
    </section>
  );
}
