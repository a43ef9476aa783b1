import { describe, expect, it } from "vitest";
import { isHeld, PayerLedger, type Reservation } from "./budget.ts";

const WINDOW = 10_000;
const TTL = 1_000;

/** A reservation of `credits` made at `at`. */
const reservation = (credits: number, at: number): Reservation => ({
  credits,
  expiresAt: at + TTL,
  settledAt: null,
});

describe("PayerLedger", () => {
  it("holds a reservation until its time-to-live passes, then releases it", () => {
    const ledger = new PayerLedger(WINDOW);
    const a = reservation(3, 0);
    ledger.reserve(a, 0);
    expect(ledger.usage(999)).toEqual({ reserved: 3, settled: 0 });
    expect(isHeld(a, 999)).toBe(true);
    expect(ledger.usage(1000)).toEqual({ reserved: 0, settled: 0 });
    expect(isHeld(a, 1000)).toBe(false);
  });

  it("moves settled credits from reserved to settled and keeps them for one window from settlement", () => {
    const ledger = new PayerLedger(WINDOW);
    const a = reservation(3, 0);
    ledger.reserve(a, 0);
    ledger.reserve(reservation(2, 100), 100);
    ledger.settle(a, 500);
    expect(a.settledAt).toBe(500);
    expect(ledger.usage(600)).toEqual({ reserved: 2, settled: 3 });
    // The second reservation expires at 1100; the settlement stays until 10_500.
    expect(ledger.usage(5_000)).toEqual({ reserved: 0, settled: 3 });
    expect(ledger.usage(10_499)).toEqual({ reserved: 0, settled: 3 });
    expect(ledger.usage(10_500)).toEqual({ reserved: 0, settled: 0 });
  });

  it("does not release a settled reservation again when its time-to-live passes", () => {
    const ledger = new PayerLedger(WINDOW);
    const a = reservation(4, 0);
    ledger.reserve(a, 0);
    ledger.settle(a, 10);
    expect(isHeld(a, 20)).toBe(false);
    expect(ledger.usage(2_000)).toEqual({ reserved: 0, settled: 4 });
  });

  it("settles a reservation once, however often it is asked to", () => {
    const ledger = new PayerLedger(WINDOW);
    const a = reservation(4, 0);
    ledger.reserve(a, 0);
    ledger.settle(a, 10);
    ledger.settle(a, 20);
    expect(ledger.usage(30)).toEqual({ reserved: 0, settled: 4 });
  });

  it("expires many reservations in order without losing count", () => {
    const ledger = new PayerLedger(WINDOW);
    for (let i = 0; i < 5_000; i++) ledger.reserve(reservation(1, i), i);
    expect(ledger.usage(4_999).reserved).toBe(1_000);
    expect(ledger.usage(6_000).reserved).toBe(0);
  });
});
