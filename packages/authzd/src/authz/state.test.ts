import { describe, expect, it } from "vitest";
import { type AuditRow, GENESIS_HASH } from "../audit/rows.ts";
import { AuthzState } from "./state.ts";

const WINDOW = 1_000;
const TTL = 100;

const iso = (ms: number) => new Date(ms).toISOString();

function decided(id: string, at: number, credits = 1): AuditRow {
  return {
    kind: "spend_authorization_decided",
    provider: "svc",
    network: "eip155:8453",
    asset: "0xa",
    amount: "5",
    per_call_cap: "10",
    credits,
    destination: "0xd",
    approved: true,
    reason: null,
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

describe("AuthzState", () => {
  it("reserves on approval and moves credits to settled on settlement, at the rows' own times", () => {
    const state = new AuthzState(WINDOW, TTL);
    state.apply(decided("a", 0, 3));
    state.apply(decided("b", 10, 2));
    state.apply(settled("a", 50, 3));
    expect(state.usage("agent", 60)).toEqual({ reserved: 2, settled: 3 });
    expect(state.usage("agent", 110)).toEqual({ reserved: 0, settled: 3 });
    expect(state.usage("agent", 1_050)).toEqual({ reserved: 0, settled: 0 });
  });

  it("ignores a second settlement row for the same decision", () => {
    const state = new AuthzState(WINDOW, TTL);
    state.apply(decided("a", 0, 3));
    state.apply(settled("a", 50, 3));
    state.apply(settled("a", 60, 3));
    expect(state.usage("agent", 70)).toEqual({ reserved: 0, settled: 3 });
  });

  it("remembers a settled decision for one window after settlement, then forgets it", () => {
    const state = new AuthzState(WINDOW, TTL);
    state.apply(decided("a", 0));
    state.apply(settled("a", 50));
    expect(state.decision("a", 1_049)?.receiptId).toBe("rcp_a");
    expect(state.decision("a", 1_050)).toBeUndefined();
  });

  it("remembers an unsettled decision for its reservation time plus one window, then forgets it", () => {
    const state = new AuthzState(WINDOW, TTL);
    state.apply(decided("a", 0));
    const decision = state.decision("a", 1_099);
    expect(decision).toMatchObject({ receiptId: null, settledAt: null, amount: "5", credits: 1 });
    expect(decision !== undefined && state.reservationHeld(decision, 99)).toBe(true);
    expect(decision !== undefined && state.reservationHeld(decision, 100)).toBe(false);
    expect(state.decision("a", 1_100)).toBeUndefined();
  });
});
