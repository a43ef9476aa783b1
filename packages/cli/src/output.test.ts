import { SvcError, type Transaction } from "@svc/sdk";
import { describe, expect, it } from "vitest";
import { describeFailure } from "./failure.ts";
import { fields, printable, table, usd, when } from "./output.ts";
import { policyFromOptions, usdBound } from "./parse.ts";
import { unconfirmedLine } from "./views.ts";

describe("human output", () => {
  it("aligns table columns, numbers on the right, with no trailing spaces", () => {
    expect(
      table(
        [{ heading: "TOKEN" }, { heading: "AMOUNT", align: "right" }, { heading: "NOTE" }],
        [
          ["USDC", "100", ""],
          ["ETH", "0.01", "gas"],
        ],
      ),
    ).toBe(["TOKEN  AMOUNT  NOTE", "USDC      100", "ETH      0.01  gas"].join("\n"));
    expect(
      fields([
        ["id", "wal_1"],
        ["status", "active"],
      ]),
    ).toBe("id      wal_1\nstatus  active");
  });

  it("writes dollars with at least two decimals, keeping every decimal given", () => {
    expect(usd("10")).toBe("$10.00");
    expect(usd("2.5")).toBe("$2.50");
    expect(usd("0.015")).toBe("$0.015");
    expect(usd(null)).toBe("none");
    expect(when("2026-11-23T01:20:03.512Z")).toBe("2026-11-23 01:20:03Z");
    expect(when(null)).toBe("never");
  });

  it("says what a spend that did not confirm paid in fees, when it landed", () => {
    const failed: Transaction = {
      id: "tx_1",
      walletId: "wal_1",
      type: "send",
      status: "failed",
      failureReason: "reverted",
      chain: "base",
      token: "USDC",
      amount: "5",
      from: "0x1111111111111111111111111111111111111111",
      to: "0x2222222222222222222222222222222222222222",
      txHash: "0xabc",
      fee: { amount: "0.000042", token: "ETH" },
      timestamp: "2026-12-07T16:00:00.000Z",
    };
    expect(unconfirmedLine(failed)).toBe("tx_1 failed on base: reverted; it paid a fee of 0.000042 ETH");
    // Never landed: no fee.
    const { fee: _, ...dropped } = {
      ...failed,
      chain: "solana",
      failureReason: "blockhash expired before the transaction landed",
    };
    expect(unconfirmedLine(dropped)).toBe(
      "tx_1 failed on solana: blockhash expired before the transaction landed",
    );
  });
});

describe("policy options", () => {
  it("reads USD bounds and none, refusing anything else", () => {
    const parse = usdBound("--max-per-tx");
    expect(parse("10")).toBe("10");
    expect(parse("$2.50")).toBe("2.50");
    expect(parse("None")).toBe("none");
    expect(() => parse("1e3")).toThrow(/--max-per-tx must be a USD amount/);
    expect(() => parse("-1")).toThrow(/--max-per-tx/);
    expect(() => parse("0.0000001")).toThrow(/--max-per-tx/);
  });

  it("builds the policy change from the options given, none when none were", () => {
    expect(policyFromOptions({})).toBeUndefined();
    expect(
      policyFromOptions({ maxPerTx: "10", whitelist: "none", requireSpendAuthorization: false }),
    ).toEqual({
      maxPerTx: "10",
      whitelist: [],
      requireSpendAuthorization: false,
    });
    expect(policyFromOptions({ whitelist: "0xa, api.example.com" })).toEqual({
      whitelist: ["0xa", "api.example.com"],
    });
  });

  it("lifts the whitelist only when told none: an empty --whitelist (an unset variable) is a usage error", () => {
    for (const empty of ["", " ", ",", " , "]) {
      expect(() => policyFromOptions({ whitelist: empty })).toThrow(
        "--whitelist must list at least one recipient, or be none for any recipient",
      );
    }
    expect(policyFromOptions({ whitelist: " None " })).toEqual({ whitelist: [] });
  });
});

describe("text from elsewhere on a terminal", () => {
  it("writes out C0 and C1 controls and bidirectional overrides, keeping lines when asked", () => {
    expect(printable("a\u001b[31mb\u009b2Jc\u202ed\re\nf")).toBe(
      "a\\u001b[31mb\\u009b2Jc\\u202ed\\u000de\\u000af",
    );
    expect(printable("one\ntwo\tthree\u0007", { keepLines: true })).toBe("one\ntwo\tthree\\u0007");
  });

  it("--verbose writes a failure's details written out too: JSON leaves C1 controls and overrides as they are", () => {
    const error = new SvcError({
      code: "PolicyViolation",
      status: 403,
      message: "refused \u009b2J",
      requestId: "req_1",
      details: { rule: "x\u009b2J\u202e" },
    });
    const described = describeFailure(error, { json: false, verbose: true });
    expect(described).not.toMatch(/[\u009b\u202e]/u);
    expect(described).toContain("\\u009b2J\\u202e");
  });
});
