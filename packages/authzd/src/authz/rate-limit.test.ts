import { describe, expect, it } from "vitest";
import { SpendRateLimiter } from "./rate-limit.ts";

describe("SpendRateLimiter", () => {
  it("admits a burst, then refills at the sustained rate, per identity", () => {
    const limiter = new SpendRateLimiter({ perSecond: 2, burst: 3 });
    expect([0, 0, 0].map(() => limiter.take("a", 0))).toEqual([0, 0, 0]);
    // Empty: one token takes half a second at 2/s; Retry-After is whole seconds, at least 1.
    expect(limiter.take("a", 0)).toBe(1);
    expect(limiter.take("b", 0)).toBe(0);
    expect(limiter.take("a", 499)).toBe(1);
    expect(limiter.take("a", 500)).toBe(0);
    expect(limiter.take("a", 500)).toBe(1);
    // A long pause refills to the burst, not beyond.
    expect([0, 0, 0, 0].map(() => limiter.take("a", 60_000))).toEqual([0, 0, 0, 1]);
  });

  it("rounds Retry-After up to whole seconds at low rates", () => {
    const limiter = new SpendRateLimiter({ perSecond: 0.25, burst: 1 });
    expect(limiter.take("a", 0)).toBe(0);
    expect(limiter.take("a", 0)).toBe(4);
    expect(limiter.take("a", 1_000)).toBe(3);
  });
});
