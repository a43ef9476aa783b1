import { describe, expect, it } from "vitest";
import { isHeld, PayerLedger, type Reservation } from "./budget.ts";

const WINDOW = 10_000;
const TTL = 1_000;

/** A reservation of `credits` made at `at`. */
const reservation = (credits: number, at: number): Reservation => ({
  credits,
  expiresAt: at + TTL,
  settledAt: null,
  cancelledAt: null,
});

const usage = (reserved: number, settled: number, expiredUnsettled = 0) => ({
  reserved,
  settled,
  expiredUnsettled,
});

describe("PayerLedger", () => {
  it("holds a reservation until its time-to-live passes, then counts it as expired-unsettled for one window", () => {
    const ledger = new PayerLedger(WINDOW);
    const a = reservation(3, 0);
    ledger.reserve(a, 0);
    expect(ledger.usage(999)).toEqual(usage(3, 0));
    expect(isHeld(a, 999)).toBe(true);
    expect(ledger.usage(1000)).toEqual(usage(0, 0, 3));
    expect(isHeld(a, 1000)).toBe(false);
    // The window runs from the lapse (1000): the money may have been spent up to then.
    expect(ledger.usage(10_999)).toEqual(usage(0, 0, 3));
    expect(ledger.usage(11_000)).toEqual(usage(0, 0, 0));
  });

  it("frees a cancelled reservation, held or lapsed, once", () => {
    const ledger = new PayerLedger(WINDOW);
    const held = reservation(3, 0);
    const lapsed = reservation(2, 0);
    ledger.reserve(held, 0);
    ledger.reserve(lapsed, 0);
    ledger.cancel(held, 500);
    ledger.cancel(held, 600);
    expect(held.cancelledAt).toBe(500);
    expect(isHeld(held, 700)).toBe(false);
    expect(ledger.usage(700)).toEqual(usage(2, 0));
    expect(ledger.usage(1_500)).toEqual(usage(0, 0, 2));
    ledger.cancel(lapsed, 2_000);
    expect(ledger.usage(2_000)).toEqual(usage(0, 0, 0));
    // Neither comes back when its queue entry is popped later.
    expect(ledger.usage(20_000)).toEqual(usage(0, 0, 0));
  });

  it("leaves a settled reservation alone when asked to cancel it, and does not settle a cancelled one", () => {
    const ledger = new PayerLedger(WINDOW);
    const a = reservation(4, 0);
    const b = reservation(1, 0);
    ledger.reserve(a, 0);
    ledger.reserve(b, 0);
    ledger.settle(a, 10);
    ledger.cancel(a, 20);
    expect(a.cancelledAt).toBeNull();
    ledger.cancel(b, 30);
    ledger.settle(b, 40);
    expect(b.settledAt).toBeNull();
    expect(ledger.usage(50)).toEqual(usage(0, 4));
  });

  it("settles a lapsed reservation as written (a replayed row): its credits move from expired-unsettled to settled, once", () => {
    // The live daemon refuses to settle a lapsed reservation; a row written under a longer reservation
    // time and replayed under a shorter one is such a settlement.
    const ledger = new PayerLedger(WINDOW);
    const a = reservation(4, 0);
    ledger.reserve(a, 0);
    expect(ledger.usage(1_000)).toEqual(usage(0, 0, 4));
    ledger.settle(a, 1_000);
    expect(a.settledAt).toBe(1_000);
    expect(ledger.usage(1_000)).toEqual(usage(0, 4, 0));
    ledger.settle(a, 1_100);
    expect(ledger.usage(1_100)).toEqual(usage(0, 4, 0));
    // It leaves the window one window after its settlement, and the lapse it had counts nowhere.
    expect(ledger.usage(1_000 + WINDOW)).toEqual(usage(0, 0, 0));
  });

  it("moves settled credits from reserved to settled and keeps them for one window from settlement", () => {
    const ledger = new PayerLedger(WINDOW);
    const a = reservation(3, 0);
    ledger.reserve(a, 0);
    ledger.reserve(reservation(2, 100), 100);
    ledger.settle(a, 500);
    expect(a.settledAt).toBe(500);
    expect(ledger.usage(600)).toEqual(usage(2, 3));
    // The second reservation lapses unsettled at 1100 and counts until 11_100; the settlement until 10_500.
    expect(ledger.usage(5_000)).toEqual(usage(0, 3, 2));
    expect(ledger.usage(10_499)).toEqual(usage(0, 3, 2));
    expect(ledger.usage(10_500)).toEqual(usage(0, 0, 2));
    expect(ledger.usage(11_100)).toEqual(usage(0, 0, 0));
  });

  it("does not release a settled reservation again when its time-to-live passes", () => {
    const ledger = new PayerLedger(WINDOW);
    const a = reservation(4, 0);
    ledger.reserve(a, 0);
    ledger.settle(a, 10);
    expect(isHeld(a, 20)).toBe(false);
    expect(ledger.usage(2_000)).toEqual(usage(0, 4));
  });

  it("settles a reservation once, however often it is asked to", () => {
    const ledger = new PayerLedger(WINDOW);
    const a = reservation(4, 0);
    ledger.reserve(a, 0);
    ledger.settle(a, 10);
    ledger.settle(a, 20);
    expect(ledger.usage(30)).toEqual(usage(0, 4));
  });

  it("expires many reservations in order without losing count", () => {
    const ledger = new PayerLedger(WINDOW);
    for (let i = 0; i < 5_000; i++) ledger.reserve(reservation(1, i), i);
    expect(ledger.usage(4_999)).toEqual(usage(1_000, 0, 4_000));
    expect(ledger.usage(6_000)).toEqual(usage(0, 0, 5_000));
    expect(ledger.usage(13_000)).toEqual(usage(0, 0, 2_999));
    expect(ledger.usage(16_000)).toEqual(usage(0, 0, 0));
  });
});
