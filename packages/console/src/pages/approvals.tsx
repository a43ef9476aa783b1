/** Approvals. (To be built.) */
export function ApprovalsPage() {
  return (
    <section>
      <h1>Approvals</h1>
    </section>
  );
}
