import { describe, expect, it } from "vitest";
import { errorFromResponse, retryAfterSeconds, SvcInternalError, SvcRateLimitError } from "./errors.ts";
import { backoffDelayMs } from "./transport.ts";

describe("backoff", () => {
  it("grows exponentially from 250 ms, is capped at 8 s, and is jittered within the upper half", () => {
    expect([0, 1, 2, 3].map((n) => backoffDelayMs(n, () => 1))).toEqual([250, 500, 1000, 2000]);
    expect([0, 1, 2, 3].map((n) => backoffDelayMs(n, () => 0))).toEqual([125, 250, 500, 1000]);
    expect(backoffDelayMs(20, () => 1)).toBe(8000);
  });
});

describe("errorFromResponse", () => {
  it("reads Retry-After as seconds or an HTTP date", () => {
    expect(retryAfterSeconds(new Headers({ "retry-after": "7" }))).toBe(7);
    const inTenSeconds = new Date(Date.now() + 10_000).toUTCString();
    expect(retryAfterSeconds(new Headers({ "retry-after": inTenSeconds }))).toBeGreaterThanOrEqual(9);
    expect(retryAfterSeconds(new Headers())).toBe(0);
  });

  it("a body that is not the error shape still gives a typed error", () => {
    expect(errorFromResponse(503, undefined, new Headers())).toBeInstanceOf(SvcInternalError);
    const limited = errorFromResponse(
      429,
      "busy",
      new Headers({ "retry-after": "3", "x-request-id": "req_1" }),
    );
    expect(limited).toBeInstanceOf(SvcRateLimitError);
    expect(limited).toMatchObject({ retryAfter: 3, requestId: "req_1", status: 429 });
  });
});
