import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { runCli, SPEND, TestDaemon } from "./harness.ts";

interface Verdict {
  approved: boolean;
  decision_id: string;
}

/** Reserved and settled credits of `payer` according to the audit rows alone. */
function budgetFromRows(
  rows: Record<string, unknown>[],
  payer: string,
): { reserved: number; settled: number } {
  const approved = new Map<string, number>();
  let settled = 0;
  for (const row of rows) {
    if (row.payer !== payer) continue;
    if (row.kind === "spend_authorization_decided" && row.approved === true) {
      approved.set(row.decision_id as string, row.credits as number);
    }
    if (row.kind === "spend_settled") {
      approved.delete(row.decision_id as string);
      settled += row.credits as number;
    }
  }
  return { reserved: [...approved.values()].reduce((a, b) => a + b, 0), settled };
}

describe("crash safety", () => {
  it("after SIGKILL during a burst, the chain verifies, every answered verdict is on it, and budgets match the rows", async () => {
    const env = { AUTHZD_SPEND_RATE_LIMIT_PER_SECOND: "0" };
    const first = await TestDaemon.start(env);
    const token = await first.identity("agent", ["wallet.spend.authorize", "wallet.spend.settle"], {
      budgetCredits: 400,
    });

    // A few settled spends first, so the rebuilt budget has both reserved and settled credits.
    for (let i = 0; i < 5; i++) {
      const verdict = await first.call<Verdict>("POST", "/spend/authorize", {
        token,
        body: { ...SPEND, credits: 2 },
      });
      const settled = await first.call("POST", "/spend/settle", {
        token,
        body: {
          decision_id: verdict.body.decision_id,
          provider: SPEND.provider,
          network: SPEND.network,
          asset: SPEND.asset,
          amount: SPEND.amount,
          credits: 2,
        },
      });
      expect(settled.status).toBe(200);
    }

    const answered: Verdict[] = [];
    let interrupted = 0;
    let stop = false;
    const clients = Array.from({ length: 32 }, async () => {
      while (!stop) {
        try {
          const reply = await first.call<Verdict>("POST", "/spend/authorize", { token, body: SPEND });
          if (reply.status === 200) answered.push(reply.body);
        } catch {
          interrupted++; // in flight when the daemon died
          return;
        }
      }
    });
    await new Promise((resolve) => setTimeout(resolve, 400));
    await first.kill();
    stop = true;
    await Promise.all(clients);
    expect(answered.length).toBeGreaterThan(0);
    expect(interrupted).toBeGreaterThan(0);

    const second = await TestDaemon.start(env, first.home);
    try {
      expect(second.operatorToken).toBe(first.operatorToken); // minted once, kept across restarts
      expect(second.output()).not.toContain("minted");
      const verify = await second.call<{ valid: boolean; rows: number }>("GET", "/audit/verify", {
        token: second.operatorToken,
      });
      expect(verify.body.valid).toBe(true);
      const rows = second.auditRows();
      expect(verify.body.rows).toBe(rows.length);
      const onChain = new Map(rows.map((row) => [row.decision_id, row]));
      for (const verdict of answered) {
        expect(onChain.get(verdict.decision_id)?.approved).toBe(verdict.approved);
      }

      const expected = budgetFromRows(rows, "agent");
      expect(expected.settled).toBe(10);
      expect(expected.reserved + expected.settled).toBeLessThanOrEqual(400);
      const budget = await second.call("GET", "/budgets/agent", { token });
      expect(budget.body).toMatchObject({
        reserved_credits: expected.reserved,
        settled_credits: expected.settled,
        available_credits: 400 - expected.reserved - expected.settled,
      });
      // The rebuilt state keeps deciding from the same numbers.
      const next = await second.call<Verdict>("POST", "/spend/authorize", { token, body: SPEND });
      expect(next.body.approved).toBe(expected.reserved + expected.settled < 400);
    } finally {
      await second.stop();
    }
  });

  it("on restart, cuts a torn last line off explicitly, keeps it aside and records the repair on the chain", async () => {
    const first = await TestDaemon.start({ SPEND_AUTHZ_ENABLED: "1" });
    const token = await first.identity("agent", ["wallet.spend.authorize"]);
    await first.call("POST", "/spend/authorize", { token, body: SPEND });
    await first.kill();
    const log = path.join(first.home, "audit.jsonl");
    const intact = fs.readFileSync(log);
    const lastLine = intact.subarray(intact.lastIndexOf(0x0a, intact.length - 2) + 1);
    fs.appendFileSync(log, lastLine.subarray(0, 40)); // a write cut short

    const torn = await runCli(["audit", "verify"], first.home);
    expect(torn.code).toBe(1);
    const rowsBefore = intact.toString().split("\n").length - 1;
    expect(JSON.parse(torn.stdout)).toMatchObject({
      valid: false,
      rows: rowsBefore + 1,
      firstBadIndex: rowsBefore,
    });

    const second = await TestDaemon.start({ SPEND_AUTHZ_ENABLED: "1" }, first.home);
    try {
      expect(second.output()).toContain("torn line (40 bytes");
      const rows = second.auditRows();
      expect(rows).toHaveLength(rowsBefore + 1);
      expect(rows.at(-1)).toMatchObject({ kind: "audit_repaired", torn_bytes: 40, seq: rowsBefore });
      const quarantine = rows.at(-1)?.quarantine_file as string;
      expect(fs.readFileSync(path.join(first.home, quarantine))).toEqual(lastLine.subarray(0, 40));
      const verify = await runCli(["audit", "verify"], first.home);
      expect(verify.code).toBe(0);
      expect(JSON.parse(verify.stdout)).toMatchObject({ valid: true, rows: rowsBefore + 1 });
    } finally {
      await second.stop();
    }
  });

  it("refuses to start on a chain that was tampered with (not a torn tail)", async () => {
    const first = await TestDaemon.start({ SPEND_AUTHZ_ENABLED: "1" });
    const token = await first.identity("agent", ["wallet.spend.authorize"]);
    await first.call("POST", "/spend/authorize", { token, body: SPEND });
    await first.stop();
    const log = path.join(first.home, "audit.jsonl");
    // Rows: identity_created (0), capability_granted (1), spend_authorization_decided (2).
    fs.writeFileSync(log, fs.readFileSync(log, "utf8").replace('"amount":"1000"', '"amount":"1001"'));
    await expect(TestDaemon.start({ SPEND_AUTHZ_ENABLED: "1" }, first.home)).rejects.toThrow(
      /audit chain invalid at row 2: row hash does not match its contents; refusing to start/,
    );
  });
});
