/**
 * The service's clock in tests: the real time plus an offset that a test moves forward, so an expiry (an API
 * key's `expiresAt`, an access token, a stale Idempotency-Key claim, the daily window) is reached at once
 * instead of slept for. Everything else keeps real time (the chains, the database's own `now()`).
 */
export class TestClock {
  #offsetMs = 0;

  /** The service reads this (`StartOptions.now`). */
  readonly now = (): Date => new Date(Date.now() + this.#offsetMs);

  /** Moves the clock `ms` forward. */
  advance(ms: number): void {
    this.#offsetMs += ms;
  }

  /** Moves the clock so that it reads `at` now. */
  jumpTo(at: Date): void {
    this.#offsetMs = at.getTime() - Date.now();
  }

  /** Back to the real time, for the tests that follow on the same server. */
  reset(): void {
    this.#offsetMs = 0;
  }
}
