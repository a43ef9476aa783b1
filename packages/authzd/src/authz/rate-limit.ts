import type { RateLimit } from "../internal/config.ts";

interface Bucket {
  tokens: number;
  /** When `tokens` was last brought up to date (ms since the epoch). */
  at: number;
}

/**
 * A token bucket per identity for `/spend/*`. It stops a runaway client loop before it reaches the
 * audit log (a refused request writes no row); the defaults sit far above what a real agent sends.
 * Memory is one small object per identity that has called, and identities are few.
 *
 * @example
 * const limiter = new SpendRateLimiter({ perSecond: 50, burst: 100 });
 * limiter.take("agent-1", Date.now()); // 0 when admitted, else seconds to wait
 */
export class SpendRateLimiter {
  private readonly buckets = new Map<string, Bucket>();

  constructor(private readonly limit: RateLimit) {}

  /**
   * Takes one token for `name` at `now`. Returns 0 when the request is admitted, otherwise the whole
   * number of seconds (at least 1) after which one token will be available again.
   */
  take(name: string, now: number): number {
    const { perSecond, burst } = this.limit;
    let bucket = this.buckets.get(name);
    if (bucket === undefined) {
      bucket = { tokens: burst, at: now };
      this.buckets.set(name, bucket);
    } else if (now > bucket.at) {
      bucket.tokens = Math.min(burst, bucket.tokens + ((now - bucket.at) * perSecond) / 1000);
      bucket.at = now;
    }
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return 0;
    }
    return Math.max(1, Math.ceil((1 - bucket.tokens) / perSecond));
  }
}
