import { describe, expect, it } from "vitest";
import { FailoverRateLimiter, MemoryRateLimiter, type RateLimiter } from "./rate-limit.ts";

describe("MemoryRateLimiter", () => {
  it("counts a window of a key from its first hit by the clock it is given, and starts a new one when it ends", async () => {
    let now = Date.parse("2026-01-01T00:00:00Z");
    const limiter = new MemoryRateLimiter(() => now);
    expect(await limiter.hit("key", 2, 60_000)).toEqual({ allowed: true, retryAfterMs: 60_000 });
    now += 10_000;
    expect(await limiter.hit("key", 2, 60_000)).toEqual({ allowed: true, retryAfterMs: 50_000 });
    expect(await limiter.hit("key", 2, 60_000)).toEqual({ allowed: false, retryAfterMs: 50_000 });
    // Another key has its own window.
    expect(await limiter.hit("other", 2, 60_000)).toEqual({ allowed: true, retryAfterMs: 60_000 });
    now += 49_999;
    expect((await limiter.hit("key", 2, 60_000)).allowed).toBe(false);
    now += 1;
    expect(await limiter.hit("key", 2, 60_000)).toEqual({ allowed: true, retryAfterMs: 60_000 });
  });

  it("starts a new window when its clock is set back past the current one, rather than holding the key", async () => {
    let now = Date.parse("2026-01-02T00:00:00Z");
    const limiter = new MemoryRateLimiter(() => now);
    await limiter.hit("key", 1, 60_000);
    expect((await limiter.hit("key", 1, 60_000)).allowed).toBe(false);
    // Back a day: the window made then would otherwise last a day and a minute from here.
    now -= 86_400_000;
    expect(await limiter.hit("key", 1, 60_000)).toEqual({ allowed: true, retryAfterMs: 60_000 });
    expect((await limiter.hit("key", 1, 60_000)).allowed).toBe(false);
  });
});

describe("FailoverRateLimiter", () => {
  it("counts here while the shared limiter fails, and tries it again 5 s into the outage by the clock it is given", async () => {
    let now = Date.parse("2026-01-03T00:00:00Z");
    let sharedAnswers = false;
    const sharedHits: string[] = [];
    const shared: RateLimiter = {
      hit: async (key) => {
        if (!sharedAnswers) throw new Error("connection refused");
        sharedHits.push(key);
        return { allowed: true, retryAfterMs: 60_000 };
      },
      close: async () => {},
    };
    const logged: string[] = [];
    const log = {
      warn: (_: object, message: string) => logged.push(message),
      info: (_: object, message: string) => logged.push(message),
    };
    const limiter = new FailoverRateLimiter(shared, log, () => now);
    expect(await limiter.hit("key", 2, 60_000)).toEqual({ allowed: true, retryAfterMs: 60_000 });
    sharedAnswers = true;
    now += 4_999;
    // Still counted here, in the window this clock measures: the shared limiter is not asked yet.
    expect(await limiter.hit("key", 2, 60_000)).toEqual({ allowed: true, retryAfterMs: 55_001 });
    expect(await limiter.hit("key", 2, 60_000)).toEqual({ allowed: false, retryAfterMs: 55_001 });
    expect(sharedHits).toEqual([]);
    now += 1;
    expect(await limiter.hit("key", 2, 60_000)).toEqual({ allowed: true, retryAfterMs: 60_000 });
    expect(sharedHits).toEqual(["key"]);
    expect(logged).toEqual([
      "shared rate limiter unavailable; counting in this process meanwhile",
      "shared rate limiter answering again; counting there",
    ]);
  });
});
