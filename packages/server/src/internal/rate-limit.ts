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

/**
 * Counters in this process's memory: the embedded default. Windows are measured by `now` (milliseconds),
 * the service's clock.
 */
export class MemoryRateLimiter implements RateLimiter {
  readonly #windows = new Map<string, { count: number; resetAt: number }>();
  #lastSweep: number;

  constructor(readonly now: () => number = Date.now) {
    this.#lastSweep = now();
  }

  async hit(key: string, limit: number, windowMs: number): Promise<RateLimitDecision> {
    const now = this.now();
    // A clock set back (a test's, or the system's) sweeps too, and ends windows that would last longer than
    // one window from now: a key is never held for the size of the step back.
    if (now - this.#lastSweep > windowMs || now < this.#lastSweep) this.#sweep(now);
    let window = this.#windows.get(key);
    if (!window || window.resetAt <= now || window.resetAt - now > windowMs) {
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
    // A command fails within about a second when Redis is away, so the fallback takes over promptly.
    this.#redis = new Redis(url, {
      maxRetriesPerRequest: 1,
      enableOfflineQueue: true,
      lazyConnect: false,
      commandTimeout: 1000,
    });
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

/** Where the failover limiter reports an outage and its end. */
export interface RateLimitLog {
  warn(fields: object, message: string): void;
  info(fields: object, message: string): void;
}

/**
 * A shared limiter (Redis) backed by counters in this process: while the shared one fails, requests are
 * counted here, so limits never fail open (login guessing included). One warning per outage, not per
 * request; during an outage the shared limiter is tried again at most every `retryMs`. The retries and the
 * counters here are timed by `now` (milliseconds), the service's clock, as {@link MemoryRateLimiter}'s are.
 */
export class FailoverRateLimiter implements RateLimiter {
  readonly #fallback: MemoryRateLimiter;
  #down = false;
  #retryAt = 0;

  constructor(
    readonly primary: RateLimiter,
    readonly log: RateLimitLog,
    readonly now: () => number = Date.now,
    readonly retryMs = 5000,
  ) {
    this.#fallback = new MemoryRateLimiter(now);
  }

  async hit(key: string, limit: number, windowMs: number): Promise<RateLimitDecision> {
    if (!this.#down || this.now() >= this.#retryAt) {
      try {
        const decision = await this.primary.hit(key, limit, windowMs);
        if (this.#down) {
          this.#down = false;
          this.log.info({}, "shared rate limiter answering again; counting there");
        }
        return decision;
      } catch (error) {
        this.#retryAt = this.now() + this.retryMs;
        if (!this.#down) {
          this.#down = true;
          const reason = String((error as { message?: unknown })?.message ?? error).slice(0, 200);
          this.log.warn({ reason }, "shared rate limiter unavailable; counting in this process meanwhile");
        }
      }
    }
    return this.#fallback.hit(key, limit, windowMs);
  }

  async close(): Promise<void> {
    await this.primary.close();
  }
}
