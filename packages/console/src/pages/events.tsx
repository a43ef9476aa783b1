/** Events. (To be built.) */
export function EventsPage() {
  return (
    <section>
      <h1>Events</h1>
    </section>
  );
}
