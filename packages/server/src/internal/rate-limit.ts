import { Redis } from "ioredis";

/** The outcome of counting one request against a limit. */
export interface RateLimitDecision {
  allowed: boolean;
  /** Milliseconds until the current window ends. */
  retryAfterMs: number;
}

/** Fixed-window counters: `limit` requests per key per `windowMs`. */
export interface RateLimiter {
  hit(key: string, limit: number, windowMs: number): Promise<RateLimitDecision>;
  close(): Promise<void>;
}

/** Counters in this process's memory: the embedded default. */
export class MemoryRateLimiter implements RateLimiter {
  readonly #windows = new Map<string, { count: number; resetAt: number }>();
  #lastSweep = Date.now();

  async hit(key: string, limit: number, windowMs: number): Promise<RateLimitDecision> {
    const now = Date.now();
    if (now - this.#lastSweep > windowMs) this.#sweep(now);
    let window = this.#windows.get(key);
    if (!window || window.resetAt <= now) {
      window = { count: 0, resetAt: now + windowMs };
      this.#windows.set(key, window);
    }
    window.count += 1;
    return { allowed: window.count <= limit, retryAfterMs: window.resetAt - now };
  }

  #sweep(now: number): void {
    for (const [key, window] of this.#windows) if (window.resetAt <= now) this.#windows.delete(key);
    this.#lastSweep = now;
  }

  async close(): Promise<void> {}
}

// INCR and set the expiry on the first hit, atomically; returns the count and the time left.
const HIT_SCRIPT = `
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]); ttl = tonumber(ARGV[1]) end
return {count, ttl}
`;

/** Counters in Redis, shared by every instance that points at the same server. */
export class RedisRateLimiter implements RateLimiter {
  readonly #redis: Redis;

  constructor(
    url: string,
    readonly prefix = "svc:ratelimit:",
  ) {
    this.#redis = new Redis(url, { maxRetriesPerRequest: 2, enableOfflineQueue: true, lazyConnect: false });
    // Connection errors surface on the requests that need Redis; the client reconnects by itself.
    this.#redis.on("error", () => {});
  }

  async hit(key: string, limit: number, windowMs: number): Promise<RateLimitDecision> {
    const [count, ttl] = (await this.#redis.eval(HIT_SCRIPT, 1, this.prefix + key, windowMs)) as [
      number,
      number,
    ];
    return { allowed: count <= limit, retryAfterMs: ttl };
  }

  async close(): Promise<void> {
    await this.#redis.quit().catch(() => {});
  }
}
