/**
 * Polls `probe` until it returns a value other than undefined (the watcher and the chains work in the
 * background). Fails after `timeoutMs`, which only bounds a broken run; no assertion is about time.
 */
export async function eventually<T>(probe: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error("condition not reached in time");
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
