import { describe, expect, it } from "vitest";
import { committedBefore, nextAttemptAt, RETRY_WINDOW_MS } from "./delivery.ts";

describe("nextAttemptAt", () => {
  it("waits 5 s after the first attempt, 30 s after the second, then longer, and gives up after 3 days", () => {
    const first = new Date("2026-01-01T00:00:00.000Z");
    let at = first;
    const waits: number[] = [];
    for (let failed = 1; failed < 100; failed++) {
      const next = nextAttemptAt(first, failed, at);
      if (next === undefined) break;
      waits.push((next.getTime() - at.getTime()) / 1000);
      at = next;
    }
    expect(waits).toEqual([5, 30, 120, 600, 1800, 3600, 7200, 14400, 28800, 43200, 43200, 43200, 43200]);
    // 14 attempts, the last within 3 days of the first; a 15th would fall after them.
    expect(at.getTime() - first.getTime()).toBeLessThanOrEqual(RETRY_WINDOW_MS);
    expect(at.getTime() + 43_200_000 - first.getTime()).toBeGreaterThan(RETRY_WINDOW_MS);
  });

  it("gives up an event whose next attempt would fall after the window, however late the attempt ran", () => {
    const first = new Date("2026-01-01T00:00:00.000Z");
    const late = new Date(first.getTime() + RETRY_WINDOW_MS - 1000);
    expect(nextAttemptAt(first, 1, late)).toBeUndefined();
    expect(nextAttemptAt(first, 1, first)).toEqual(new Date(first.getTime() + 5000));
  });
});

describe("committedBefore", () => {
  it("reads a pg_snapshot: below xmin committed, from xmax on not, between them unless running", () => {
    const snapshot = "100:110:103,107";
    expect(committedBefore(99n, snapshot)).toBe(true);
    expect(committedBefore(100n, snapshot)).toBe(true);
    expect(committedBefore(103n, snapshot)).toBe(false);
    expect(committedBefore(105n, snapshot)).toBe(true);
    expect(committedBefore(107n, snapshot)).toBe(false);
    expect(committedBefore(110n, snapshot)).toBe(false);
    expect(committedBefore(752n, "752:752:")).toBe(false);
    expect(committedBefore(751n, "752:752:")).toBe(true);
  });
});
