import { describe, expect, it } from "vitest";
import { type AuditRow, GENESIS_HASH } from "../audit/rows.ts";
import { AuthzState, decisionState } from "./state.ts";

const WINDOW = 1_000;
const TTL = 100;

const iso = (ms: number) => new Date(ms).toISOString();

function decided(id: string, at: number, credits = 1, approved = true): AuditRow {
  return {
    kind: "spend_authorization_decided",
    provider: "svc",
    network: "eip155:8453",
    asset: "0xa",
    amount: "5",
    per_call_cap: "10",
    credits,
    destination: "0xd",
    approved,
    reason: approved ? null : "amount 5 exceeds per_call_cap 1",
    decision_id: id,
    payer: "agent",
    seq: 0,
    prev: GENESIS_HASH,
    time: iso(at),
  };
}

function settled(id: string, at: number, credits = 1): AuditRow {
  return {
    kind: "spend_settled",
    decision_id: id,
    receipt_id: `rcp_${id}`,
    payer: "agent",
    provider: "svc",
    network: "eip155:8453",
    asset: "0xa",
    amount: "5",
    credits,
    tx_sig: null,
    seq: 1,
    prev: GENESIS_HASH,
    time: iso(at),
  };
}

function cancelled(id: string, at: number): AuditRow {
  return {
    kind: "spend_cancelled",
    decision_id: id,
    payer: "agent",
    seq: 2,
    prev: GENESIS_HASH,
    time: iso(at),
  };
}

function consumedOrReleased(
  kind: "spend_consumed" | "spend_released",
  id: string,
  at: number,
  consumer = "svc",
): AuditRow {
  return { kind, decision_id: id, payer: "agent", consumer, seq: 3, prev: GENESIS_HASH, time: iso(at) };
}

describe("AuthzState", () => {
  it("reserves on approval and moves credits to settled on settlement, at the rows' own times", () => {
    const state = new AuthzState(WINDOW, TTL);
    state.apply(decided("a", 0, 3));
    state.apply(decided("b", 10, 2));
    state.apply(settled("a", 50, 3));
    expect(state.usage("agent", 60)).toEqual({ reserved: 2, settled: 3, expiredUnsettled: 0 });
    // b lapses unsettled at 110 and keeps counting until 1_110 (fail-closed).
    expect(state.usage("agent", 110)).toEqual({ reserved: 0, settled: 3, expiredUnsettled: 2 });
    expect(state.usage("agent", 1_050)).toEqual({ reserved: 0, settled: 0, expiredUnsettled: 2 });
    expect(state.usage("agent", 1_110)).toEqual({ reserved: 0, settled: 0, expiredUnsettled: 0 });
  });

  it("ignores a second settlement row for the same decision", () => {
    const state = new AuthzState(WINDOW, TTL);
    state.apply(decided("a", 0, 3));
    state.apply(settled("a", 50, 3));
    state.apply(settled("a", 60, 3));
    expect(state.usage("agent", 70)).toEqual({ reserved: 0, settled: 3, expiredUnsettled: 0 });
  });

  it("remembers a settled decision for its reservation time plus one window, then forgets it", () => {
    const state = new AuthzState(WINDOW, TTL);
    state.apply(decided("a", 0));
    state.apply(settled("a", 50));
    expect(state.decision("a", 1_099)?.receiptId).toBe("rcp_a");
    expect(state.decision("a", 1_100)).toBeUndefined();
  });

  it("remembers denied decisions, without reserving anything", () => {
    const state = new AuthzState(WINDOW, TTL);
    state.apply(decided("d", 0, 4, false));
    const decision = state.decision("d", 1_099);
    expect(decision).toMatchObject({ approved: false, reason: "amount 5 exceeds per_call_cap 1" });
    expect(decision !== undefined && decisionState(decision, 10)).toBe("denied");
    expect(state.usage("agent", 10)).toEqual({ reserved: 0, settled: 0, expiredUnsettled: 0 });
    expect(state.decision("d", 1_100)).toBeUndefined();
  });

  it("replays a cancellation: the credits stop counting and the state says cancelled", () => {
    const state = new AuthzState(WINDOW, TTL);
    state.apply(decided("a", 0, 3));
    state.apply(decided("b", 0, 2));
    state.apply(cancelled("a", 10));
    state.apply(cancelled("b", 500));
    // a settlement row after a cancellation changes nothing
    state.apply(settled("a", 20, 3));
    expect(state.usage("agent", 600)).toEqual({ reserved: 0, settled: 0, expiredUnsettled: 0 });
    const a = state.decision("a", 600);
    expect(a !== undefined && decisionState(a, 600)).toBe("cancelled");
    expect(a?.receiptId).toBeNull();
  });

  it("remembers an unsettled decision for its reservation time plus one window, then forgets it", () => {
    const state = new AuthzState(WINDOW, TTL);
    state.apply(decided("a", 0));
    const decision = state.decision("a", 1_099);
    expect(decision).toMatchObject({ receiptId: null, settledAt: null, amount: "5", credits: 1 });
    expect(decision !== undefined && state.reservationHeld(decision, 99)).toBe(true);
    expect(decision !== undefined && decisionState(decision, 99)).toBe("approved");
    expect(decision !== undefined && state.reservationHeld(decision, 100)).toBe(false);
    expect(decision !== undefined && decisionState(decision, 100)).toBe("expired");
    expect(state.decision("a", 1_100)).toBeUndefined();
  });

  it("replays a consumption: it keeps counting past its lapse, a cancellation row after it changes nothing", () => {
    const state = new AuthzState(WINDOW, TTL);
    state.apply(decided("a", 0, 3));
    state.apply(consumedOrReleased("spend_consumed", "a", 10));
    state.apply(cancelled("a", 20));
    const a = state.decision("a", 50);
    expect(a).toMatchObject({ consumer: "svc", consumedAt: 10, cancelledAt: null });
    expect(a !== undefined && decisionState(a, 50)).toBe("consumed");
    // Past the lapse it is still consumed, and its credits count for one window (fail closed).
    expect(a !== undefined && decisionState(a, 200)).toBe("consumed");
    expect(state.usage("agent", 200)).toEqual({ reserved: 0, settled: 0, expiredUnsettled: 3 });
  });

  it("replays rows as written when the reservation time is shorter now: a late consumption and settlement still hold", () => {
    // Written by a daemon with a reservation time of 10 × TTL: consumed and settled at 3 × TTL, in time.
    const state = new AuthzState(WINDOW, TTL);
    state.apply(decided("consumed", 0, 3));
    state.apply(decided("settled", 0, 2));
    state.apply(consumedOrReleased("spend_consumed", "consumed", 3 * TTL));
    state.apply(settled("settled", 3 * TTL, 2));
    // The payer's cancels, refused by the live daemon then, change nothing on replay either.
    state.apply(cancelled("consumed", 4 * TTL));
    state.apply(cancelled("settled", 4 * TTL));
    const consumed = state.decision("consumed", 5 * TTL);
    const settledOne = state.decision("settled", 5 * TTL);
    expect(consumed).toMatchObject({ consumedAt: 3 * TTL, cancelledAt: null });
    expect(consumed !== undefined && decisionState(consumed, 5 * TTL)).toBe("consumed");
    expect(settledOne).toMatchObject({ settledAt: 3 * TTL, receiptId: "rcp_settled", cancelledAt: null });
    expect(settledOne !== undefined && decisionState(settledOne, 5 * TTL)).toBe("settled");
    // Every credit still counts: the consumed one as lapsed unsettled, the settled one as settled.
    expect(state.usage("agent", 5 * TTL)).toEqual({ reserved: 0, settled: 2, expiredUnsettled: 3 });
    // Each leaves the window once, never counted twice nor below zero.
    expect(state.usage("agent", TTL + WINDOW)).toEqual({ reserved: 0, settled: 2, expiredUnsettled: 0 });
    expect(state.usage("agent", 3 * TTL + WINDOW)).toEqual({ reserved: 0, settled: 0, expiredUnsettled: 0 });
  });

  it("replays a release by the consumer only: the credits stop counting and the state says released", () => {
    const state = new AuthzState(WINDOW, TTL);
    state.apply(decided("a", 0, 3));
    state.apply(consumedOrReleased("spend_consumed", "a", 10));
    state.apply(consumedOrReleased("spend_released", "a", 20, "someone-else"));
    expect(state.usage("agent", 30)).toEqual({ reserved: 3, settled: 0, expiredUnsettled: 0 });
    state.apply(consumedOrReleased("spend_released", "a", 30));
    // neither a second consumption nor a settlement revives it
    state.apply(consumedOrReleased("spend_consumed", "a", 40, "other"));
    state.apply(settled("a", 50, 3));
    expect(state.usage("agent", 60)).toEqual({ reserved: 0, settled: 0, expiredUnsettled: 0 });
    const a = state.decision("a", 60);
    expect(a !== undefined && decisionState(a, 60)).toBe("released");
    expect(a).toMatchObject({ consumer: "svc", receiptId: null });
  });
});
