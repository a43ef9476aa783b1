import { describe, expect, it } from "vitest";
import {
  atomicGreater,
  isDecisionId,
  parseAuthorizeRequest,
  parseCancelRequest,
  parseSettleRequest,
} from "./validate.ts";

const VALID = {
  provider: "svc",
  network: "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp",
  asset: "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v",
  amount: "0",
  per_call_cap: "115792089237316195423570985008687907853269984665640564039457584007913129639935",
  credits: 1,
  destination: "9WzDXwBbmkg8ZTbNMqUxvQRAyrZzDsGYdLVL9zYtAWWM",
};

describe("request validation", () => {
  it("accepts a complete authorize body with zero amount and a uint256 cap", () => {
    expect(parseAuthorizeRequest(VALID)).toEqual({ ok: true, value: VALID });
  });

  it("refuses an authorization that costs no credits", () => {
    expect(parseAuthorizeRequest({ ...VALID, credits: 0 })).toEqual({
      ok: false,
      error: "credits must be an integer of at least 1",
    });
  });

  it("takes exactly a well-formed decision_id as a cancel body", () => {
    const id = `dec_${"ab".repeat(16)}`;
    expect(parseCancelRequest({ decision_id: id })).toEqual({ ok: true, value: { decision_id: id } });
    expect(parseCancelRequest({ decision_id: id, credits: 1 }).ok).toBe(false);
    expect(parseCancelRequest({ decision_id: "dec_1" }).ok).toBe(false);
    expect(parseCancelRequest({}).ok).toBe(false);
    expect(isDecisionId(id)).toBe(true);
    expect(isDecisionId(id.toUpperCase())).toBe(false);
  });

  it("names the first missing, unknown or invalid field", () => {
    const { credits: _credits, ...missing } = VALID;
    expect(parseAuthorizeRequest(missing)).toEqual({ ok: false, error: "credits is required" });
    expect(parseAuthorizeRequest({ ...VALID, memo: "x" })).toEqual({
      ok: false,
      error: 'unknown field "memo"',
    });
    expect(parseAuthorizeRequest({ ...VALID, credits: 1.5 })).toEqual({
      ok: false,
      error: "credits must be an integer of at least 1",
    });
    expect(parseAuthorizeRequest({ ...VALID, amount: "007" }).ok).toBe(false);
    expect(parseAuthorizeRequest({ ...VALID, per_call_cap: "1".repeat(79) }).ok).toBe(false);
    expect(parseAuthorizeRequest([VALID])).toEqual({ ok: false, error: "body must be a JSON object" });
  });

  it("takes tx_sig as the only optional settle field, null meaning absent", () => {
    const settle = {
      decision_id: `dec_${"ab".repeat(16)}`,
      provider: "svc",
      network: "eip155:8453",
      asset: "0xa",
      amount: "5",
      credits: 1,
    };
    expect(parseSettleRequest(settle).ok).toBe(true);
    expect(parseSettleRequest({ ...settle, tx_sig: "0xabc" }).ok).toBe(true);
    // null means "absent": the settlement records tx_sig null, as when the field is left out.
    const withNull = parseSettleRequest({ ...settle, tx_sig: null });
    expect(withNull.ok).toBe(true);
    expect(withNull.ok && (withNull.value.tx_sig ?? null)).toBe(null);
    expect(parseSettleRequest({ ...settle, tx_sig: "" })).toEqual({
      ok: false,
      error:
        "tx_sig must be a non-empty string of at most 256 printable ASCII characters without spaces (transaction signature)",
    });
    expect(parseSettleRequest({ ...settle, per_call_cap: "5" })).toEqual({
      ok: false,
      error: 'unknown field "per_call_cap"',
    });
  });

  it("compares atomic amounts exactly at any length", () => {
    expect(atomicGreater("10", "9")).toBe(true);
    expect(atomicGreater("9", "10")).toBe(false);
    expect(atomicGreater("9007199254740993", "9007199254740992")).toBe(true);
    expect(atomicGreater("5", "5")).toBe(false);
  });
});
