/**
 * The one polling helper of every package's tests. Asks `probe` again until it returns a value other than
 * `undefined` or `false`, and returns that value. A probe that throws fails at once (it is a broken run,
 * not a state still to come).
 *
 * `timeoutMs` is a deadline that only bounds a broken run: it is generous, because the machine may be
 * loaded, and no assertion is about how long the wait took. `describe` says what was awaited when the
 * deadline passes (a function is called then, so it can show the last state seen).
 *
 * @example
 * const settled = await eventually(async () => {
 *   const tx = (await api.get(`/v1/transactions/${id}`, key)).body;
 *   return tx.status === "pending" ? undefined : tx;
 * }, { describe: `transaction ${id} to leave pending` });
 */
export async function eventually<T>(
  probe: () => T | undefined | false | Promise<T | undefined | false>,
  options: { timeoutMs?: number; intervalMs?: number; describe?: string | (() => string) } = {},
): Promise<T> {
  const { timeoutMs = 60_000, intervalMs = 50 } = options;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) {
      const what = typeof options.describe === "function" ? options.describe() : options.describe;
      throw new Error(`still waiting after ${timeoutMs} ms for ${what ?? "the condition"}`);
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
