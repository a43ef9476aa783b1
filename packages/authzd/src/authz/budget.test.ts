import { describe, expect, it } from "vitest";
import { PayerLedger } from "./budget.ts";

const WINDOW = 10_000;
const TTL = 1_000;

describe("PayerLedger", () => {
  it("holds a reservation until its time-to-live passes, then releases it", () => {
    const ledger = new PayerLedger(WINDOW, TTL);
    ledger.reserve("a", 3, 0);
    expect(ledger.usage(999)).toEqual({ reserved: 3, settled: 0 });
    expect(ledger.holds("a", 999)).toBe(true);
    expect(ledger.usage(1000)).toEqual({ reserved: 0, settled: 0 });
    expect(ledger.holds("a", 1000)).toBe(false);
  });

  it("moves settled credits from reserved to settled and keeps them for one window from settlement", () => {
    const ledger = new PayerLedger(WINDOW, TTL);
    ledger.reserve("a", 3, 0);
    ledger.reserve("b", 2, 100);
    ledger.settle("a", 3, 500);
    expect(ledger.usage(600)).toEqual({ reserved: 2, settled: 3 });
    // b's reservation expires at 1100; a's settlement stays until 10_500.
    expect(ledger.usage(5_000)).toEqual({ reserved: 0, settled: 3 });
    expect(ledger.usage(10_499)).toEqual({ reserved: 0, settled: 3 });
    expect(ledger.usage(10_500)).toEqual({ reserved: 0, settled: 0 });
  });

  it("does not release a settled reservation again when its time-to-live passes", () => {
    const ledger = new PayerLedger(WINDOW, TTL);
    ledger.reserve("a", 4, 0);
    ledger.settle("a", 4, 10);
    expect(ledger.usage(2_000)).toEqual({ reserved: 0, settled: 4 });
  });

  it("expires many reservations in order without losing count", () => {
    const ledger = new PayerLedger(WINDOW, TTL);
    for (let i = 0; i < 5_000; i++) ledger.reserve(`d${i}`, 1, i);
    expect(ledger.usage(4_999).reserved).toBe(1_000);
    expect(ledger.usage(6_000).reserved).toBe(0);
  });
});
