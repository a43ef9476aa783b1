/**
 * The spend gate through MCP: `svc-mcp` over stdio with `SVC_AUTHZD_URL`/`SVC_AUTHZD_TOKEN` sends through the
 * SDK's gate against a real authorization daemon: an approved send is confirmed on chain and its decision
 * settled; a send the daemon denies is a tool error saying why, and nothing moves.
 */

import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { startTestDaemon, type TestDaemon } from "@svc/authzd/testing";
import { toAtomic } from "@svc/sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../../test/support/eventually.ts";
import { call, startWorld, stdioClient, usdcOf, type World } from "./support.ts";

let daemon: TestDaemon;
let world: World;
let agent: Client;

beforeAll(async () => {
  daemon = await startTestDaemon();
  const agentToken = await daemon.identity("mcp-agent", ["wallet.spend.authorize", "wallet.spend.settle"], {
    budgetCredits: 10_000_000,
  });
  const serviceToken = await daemon.identity("svc-service", ["wallet.spend.verify"]);
  world = await startWorld({ SVC_AUTHZD_URL: daemon.url, SVC_AUTHZD_TOKEN: serviceToken });
  agent = await stdioClient(world, world.agentKey, {
    env: { SVC_AUTHZD_URL: daemon.url, SVC_AUTHZD_TOKEN: agentToken },
  });
});
afterAll(async () => {
  await agent?.close();
  await world?.close();
  await daemon?.stop({ removeHome: true });
});

const rows = (kind: string) => daemon.auditRows().filter((row) => row.kind === kind);

describe("svc-mcp with the spend gate", () => {
  it("sends through the daemon: authorized, confirmed on chain, settled", async () => {
    const payeeBefore = await usdcOf(world.payee);
    const sent = await call(agent, "send", {
      walletId: world.payer.id,
      to: world.payee.evm?.address,
      amount: "2",
      token: "USDC",
      chain: "base",
    });
    expect(sent.isError, sent.text).toBe(false);
    const decisionId = sent.structured.spendDecisionId as string;
    expect(decisionId).toMatch(/^dec_/);
    expect(rows("spend_authorization_decided").find((row) => row.decision_id === decisionId)).toMatchObject({
      approved: true,
    });
    expect(rows("spend_settled").map((row) => row.decision_id)).toContain(decisionId);
    await eventually(
      async () => toAtomic(await usdcOf(world.payee), 6) === toAtomic(payeeBefore, 6) + 2_000_000n,
      { describe: "the payee to receive 2 USDC" },
    );
  });

  it("a send held for the owner's approval is settled once get_transaction finds it approved and broadcast", async () => {
    const payer = await world.admin.wallet.get(world.payer.id);
    const policy = await payer.policy.get();
    await payer.policy.update({ approvalAbove: "1" });
    try {
      const held = await call(agent, "send", {
        walletId: world.payer.id,
        to: world.payee.evm?.address,
        amount: "1.5",
        token: "USDC",
        chain: "base",
      });
      expect(held.isError, held.text).toBe(false);
      expect(held.structured.status).toBe("pending_approval");
      const decisionId = held.structured.spendDecisionId as string;
      expect(rows("spend_settled").map((row) => row.decision_id)).not.toContain(decisionId);

      await world.admin.approvals.approve(held.structured.id as string);
      const read = await call(agent, "get_transaction", { transactionId: held.structured.id });
      expect(read.structured.txHash).toEqual(expect.any(String));
      expect(rows("spend_settled").filter((row) => row.decision_id === decisionId)).toHaveLength(1);
    } finally {
      await payer.policy.update({ approvalAbove: policy.approvalAbove });
    }
  });

  it("a spend the daemon denies is a tool error that says why; nothing is sent", async () => {
    const payeeBefore = await usdcOf(world.payee);
    const sendsBefore = (
      await world.admin.wallet.get(world.payer.id).then((w) => w.transactions({ type: "send" }))
    ).total;
    // Over the wallet's maxPerTx ($10), which the gate asks the daemon to cap the call at.
    const denied = await call(agent, "send", {
      walletId: world.payer.id,
      to: world.payee.evm?.address,
      amount: "11",
      token: "USDC",
      chain: "base",
    });
    expect(denied.isError).toBe(true);
    expect(denied.structured).toMatchObject({ code: "SpendDenied" });
    expect(denied.text).toMatch(/Spend denied by the authorization daemon: /);
    const verdict = rows("spend_authorization_decided").at(-1);
    expect(verdict).toMatchObject({ approved: false });
    const sendsAfter = (
      await world.admin.wallet.get(world.payer.id).then((w) => w.transactions({ type: "send" }))
    ).total;
    expect(sendsAfter).toBe(sendsBefore);
    expect(await usdcOf(world.payee)).toBe(payeeBefore);
  });
});
