import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SPEND, TestDaemon } from "./harness.ts";

describe("budget under concurrency", () => {
  let daemon: TestDaemon;

  beforeAll(async () => {
    daemon = await TestDaemon.start({ AUTHZD_SPEND_RATE_LIMIT_PER_SECOND: "0" });
  });

  afterAll(async () => {
    await daemon.stop();
  });

  it("approves exactly 50 of 200 concurrent 1-credit authorizations against a budget of 50", async () => {
    const token = await daemon.identity("agent", ["wallet.spend.authorize"], { budgetCredits: 50 });
    const replies = await Promise.all(
      Array.from({ length: 200 }, () =>
        daemon.call<{ approved: boolean; reason?: string }>("POST", "/spend/authorize", {
          token,
          body: SPEND,
        }),
      ),
    );
    expect(replies.every((reply) => reply.status === 200)).toBe(true);
    const approved = replies.filter((reply) => reply.body.approved);
    expect(approved).toHaveLength(50);
    const denied = replies.filter((reply) => !reply.body.approved);
    expect(denied.every((reply) => reply.body.reason?.startsWith("budget exceeded: 50 of 50 credits"))).toBe(
      true,
    );

    const rows = daemon.auditRows().filter((row) => row.kind === "spend_authorization_decided");
    expect(rows).toHaveLength(200);
    expect(rows.filter((row) => row.approved)).toHaveLength(50);
    const budget = await daemon.call("GET", "/budgets/agent", { token });
    expect(budget.body).toMatchObject({ budget_credits: 50, reserved_credits: 50, available_credits: 0 });
  });
});
