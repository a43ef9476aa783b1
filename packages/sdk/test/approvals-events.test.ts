import { fundEvm } from "@svc/devnet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../../test/support/eventually.ts";
import {
  type EventType,
  type SvcEvent,
  SvcForbiddenError,
  SvcPolicyViolationError,
  SvcValidationError,
  SvcWaitTimeoutError,
  type SvcWallet,
  type Wallet,
} from "../src/index.ts";
import { ETH, sharedDevnet, startWorld, USDC, type World } from "./support.ts";

let world: World;

beforeAll(async () => {
  world = await startWorld();
});
afterAll(() => world.close());

/** A base wallet with gas and 100 USDC on the devnet, created by `owner` with `policy`. */
async function heldWallet(policy: Record<string, unknown>, owner: SvcWallet = world.admin): Promise<Wallet> {
  const wallet = await owner.wallet.create({ name: "held", chains: ["base"], policy });
  await fundEvm(await sharedDevnet(), wallet.evm?.address as `0x${string}`, { eth: ETH, usdc: 100n * USDC });
  return wallet;
}

async function newPayee(): Promise<{ wallet: Wallet; address: string }> {
  const wallet = await world.admin.wallet.create({ name: "payee", chains: ["base"] });
  return { wallet, address: wallet.evm?.address as string };
}

async function usdcOf(wallet: Wallet): Promise<string | undefined> {
  const { balances } = await wallet.balance();
  return balances.find((b) => b.chain === "base" && b.token === "USDC")?.amount;
}

/**
 * Every event of a wallet (oldest first) once those of `types` are all there: an event is listed a moment
 * after its change commits (once every older transaction has ended).
 */
async function eventsOnceListed(walletId: string, types: EventType[]): Promise<SvcEvent[]> {
  let seen: string[] = [];
  return eventually(
    async () => {
      const { data } = await world.admin.events.list({ walletId, limit: 100 });
      seen = data.map((event) => event.type);
      return types.every((type) => seen.includes(type)) && data;
    },
    { describe: () => `events ${types.join(", ")} of ${walletId}; seen ${seen.join(", ")}` },
  );
}

describe("a send above approvalAbove, through svc.approvals", () => {
  it("send resolves to pending_approval with nothing moved; approve broadcasts it; waitForTransaction sees it confirmed on chain", async () => {
    const wallet = await heldWallet({ approvalAbove: "5" });
    const payee = await newPayee();
    const held = await wallet.send({ to: payee.address, amount: 7, token: "USDC", chain: "base" });
    expect(held).toMatchObject({ status: "pending_approval", amount: "7", approval: { status: "pending" } });
    expect(held.txHash).toBeUndefined();
    expect(Date.parse(held.approval?.expiresAt as string)).toBeGreaterThan(Date.parse(held.timestamp));

    const waiting = await world.admin.approvals.list();
    expect(waiting.find((approval) => approval.id === held.id)).toMatchObject({
      status: "pending_approval",
      amount: "7",
      expiresAt: held.approval?.expiresAt,
    });
    expect(await usdcOf(payee.wallet)).toBe("0");

    const approved = await world.admin.approvals.approve(held.id);
    expect(approved).toMatchObject({ id: held.id, status: "pending", approval: { status: "approved" } });
    expect(approved.txHash).toMatch(/^0x[0-9a-f]{64}$/);
    const done = await wallet.waitForTransaction(held.id, { timeoutMs: 120_000, intervalMs: 100 });
    expect(done).toMatchObject({ status: "confirmed", txHash: approved.txHash });
    expect(await usdcOf(payee.wallet)).toBe("7");
    expect((await world.admin.approvals.list({ status: "approved" })).map((a) => a.id)).toContain(held.id);
    expect((await world.admin.approvals.list()).map((a) => a.id)).not.toContain(held.id);
  });

  it("an approve retried with its Idempotency-Key answers the same broadcast; another decision is already_decided", async () => {
    const wallet = await heldWallet({ approvalAbove: "5" });
    const payee = await newPayee();
    const held = await wallet.send({ to: payee.address, amount: 6, token: "USDC", chain: "base" });
    const first = await world.admin.approvals.approve(held.id, { idempotencyKey: `approve-${held.id}` });
    const again = await world.admin.approvals.approve(held.id, { idempotencyKey: `approve-${held.id}` });
    expect(again.txHash).toBe(first.txHash);
    const conflicting = await world.admin.approvals.reject(held.id).catch((e) => e);
    expect(conflicting).toBeInstanceOf(SvcValidationError);
    expect(conflicting).toMatchObject({ status: 409, reason: "already_decided" });
    await wallet.waitForTransaction(held.id, { timeoutMs: 120_000, intervalMs: 100 });
    expect(await usdcOf(payee.wallet)).toBe("6");
  });

  it("reject ends it rejected (approval_rejected) and gives the daily limit its room back", async () => {
    const wallet = await heldWallet({ approvalAbove: "5", dailyLimit: "10" });
    const payee = await newPayee();
    const held = await wallet.send({ to: payee.address, amount: 7, token: "USDC", chain: "base" });
    // The held 7 is reserved: 4 more would pass the daily 10.
    const over = await wallet
      .send({ to: payee.address, amount: 4, token: "USDC", chain: "base" })
      .catch((e) => e);
    expect(over).toBeInstanceOf(SvcPolicyViolationError);
    expect(over.reason).toBe("daily_limit");

    const rejected = await world.admin.approvals.reject(held.id);
    expect(rejected).toMatchObject({
      id: held.id,
      status: "rejected",
      failureReason: "approval_rejected",
      approval: { status: "rejected" },
    });
    expect(await wallet.waitForTransaction(held.id)).toMatchObject({ status: "rejected" });
    const sent = await wallet.send({ to: payee.address, amount: 4, token: "USDC", chain: "base" });
    expect(sent.status).toBe("pending");
    expect((await world.admin.approvals.list({ status: "rejected" })).map((a) => a.id)).toContain(held.id);
    const second = await world.admin.approvals.reject(held.id).catch((e) => e);
    expect(second).toMatchObject({ status: 409, reason: "already_decided" });
  });

  it("approve checks the policy again: a refusal is SvcPolicyViolationError and leaves it waiting", async () => {
    const wallet = await heldWallet({ approvalAbove: "5" });
    const payee = await newPayee();
    const held = await wallet.send({ to: payee.address, amount: 7, token: "USDC", chain: "base" });
    await wallet.policy.pause();
    const refused = await world.admin.approvals.approve(held.id).catch((e) => e);
    expect(refused).toBeInstanceOf(SvcPolicyViolationError);
    expect(refused.reason).toBe("policy_paused");
    expect(await world.admin.transactions.get(held.id)).toMatchObject({ status: "pending_approval" });
    await wallet.policy.resume();
    expect((await world.admin.approvals.approve(held.id)).status).toBe("pending");
    expect(await wallet.waitForTransaction(held.id, { timeoutMs: 120_000, intervalMs: 100 })).toMatchObject({
      status: "confirmed",
    });
  });

  it("an agent key cannot approve or reject (SvcForbiddenError); the spend stays pending_approval", async () => {
    const wallet = await heldWallet({ approvalAbove: "5" });
    const payee = await newPayee();
    const { key } = await world.admin.apiKeys.create({
      name: "agent",
      role: "agent",
      walletIds: [wallet.id],
    });
    const agent = world.client({ apiKey: key });
    const mine = await agent.wallet.get(wallet.id);
    const held = await mine.send({ to: payee.address, amount: 8, token: "USDC", chain: "base" });
    expect(held.status).toBe("pending_approval");
    // The agent may see what waits for its wallet, not decide it.
    expect((await agent.approvals.list()).map((a) => a.id)).toEqual([held.id]);
    for (const decide of [agent.approvals.approve, agent.approvals.reject]) {
      const error = await decide(held.id).catch((e) => e);
      expect(error).toBeInstanceOf(SvcForbiddenError);
      expect(error).toMatchObject({ status: 403, reason: "insufficient_role" });
    }
    expect(await world.admin.transactions.get(held.id)).toMatchObject({
      status: "pending_approval",
      approval: { status: "pending" },
    });
  });

  it("waitForTransaction: its deadline throws SvcWaitTimeoutError with the last state; `until` must be a status", async () => {
    const wallet = await heldWallet({ approvalAbove: "5" });
    const payee = await newPayee();
    const held = await wallet.send({ to: payee.address, amount: 9, token: "USDC", chain: "base" });
    const timedOut = await wallet.waitForTransaction(held.id, { timeoutMs: 0 }).catch((e) => e);
    expect(timedOut).toBeInstanceOf(SvcWaitTimeoutError);
    expect(timedOut.transaction).toMatchObject({ id: held.id, status: "pending_approval" });
    // Waiting for the state it is in returns at once.
    expect(await wallet.waitForTransaction(held.id, { until: "pending_approval" })).toMatchObject({
      id: held.id,
    });
    const bad = await wallet.waitForTransaction(held.id, { until: "done" as never }).catch((e) => e);
    expect(bad).toBeInstanceOf(SvcValidationError);
    const other = await newPayee();
    const foreign = await other.wallet.waitForTransaction(held.id).catch((e) => e);
    expect(foreign).toBeInstanceOf(SvcValidationError);
    await world.admin.approvals.reject(held.id);
  });
});

describe("svc.events", () => {
  it("list shows a held and approved spend's events in order: created, approval requested and approved, confirmed", async () => {
    const wallet = await heldWallet({ approvalAbove: "5", alertAbove: "6" });
    const payee = await newPayee();
    const held = await wallet.send({ to: payee.address, amount: 7, token: "USDC", chain: "base" });
    await world.admin.approvals.approve(held.id);
    await wallet.waitForTransaction(held.id, { timeoutMs: 120_000, intervalMs: 100 });
    const events = await eventsOnceListed(wallet.id, ["transaction.confirmed"]);
    const about = events.filter(
      (event) => event.data && "id" in event.data && (event.data as { id: string }).id === held.id,
    );
    expect(about.map((event) => event.type)).toEqual([
      "transaction.created",
      "approval.requested",
      "approval.approved",
      "transaction.confirmed",
    ]);
    const confirmed = about.at(-1);
    expect(confirmed?.id).toMatch(/^evt_/);
    if (confirmed?.type === "transaction.confirmed") expect(confirmed.data.status).toBe("confirmed");
    const alert = events.find((event) => event.type === "spend.alert");
    expect(alert?.type === "spend.alert" && alert.data).toMatchObject({
      alertAbove: "6.00",
      transaction: { id: held.id },
    });
    // Filtered by type (several types go as a comma list).
    const approvals = await world.admin.events.list({
      walletId: wallet.id,
      type: ["approval.requested", "approval.approved"],
    });
    expect(approvals.data.map((event) => event.type)).toEqual(["approval.requested", "approval.approved"]);
  });

  it("iterate follows nextCursor page by page, ends at the end, and its cursor reads on from there", async () => {
    const wallet = await heldWallet({ approvalAbove: "5" });
    const payee = await newPayee();
    const held = await wallet.send({ to: payee.address, amount: 7, token: "USDC", chain: "base" });
    await world.admin.approvals.reject(held.id);
    // The funding's receives are recorded whenever the chain watcher sees them: keep to this spend's types.
    const type: EventType[] = ["transaction.created", "approval.requested", "approval.rejected"];
    await eventsOnceListed(wallet.id, ["approval.rejected"]);
    const listed = await world.admin.events.list({ walletId: wallet.id, type, limit: 100 });
    expect(listed.data.map((event) => event.type)).toEqual(type);
    const stream = world.admin.events.iterate({ walletId: wallet.id, type, limit: 1 });
    const iterated: SvcEvent[] = [];
    for await (const event of stream) iterated.push(event);
    expect(iterated).toEqual(listed.data);
    expect(stream.cursor).toEqual(expect.any(String));
    const after = await world.admin.events.list({
      walletId: wallet.id,
      type,
      after: stream.cursor as string,
    });
    expect(after.data).toEqual([]);
  });

  it("iterate with follow keeps polling: sees an event written later, and ends without an error on abort", async () => {
    const wallet = await heldWallet({ approvalAbove: "5" });
    const payee = await newPayee();
    const first = await wallet.send({ to: payee.address, amount: 7, token: "USDC", chain: "base" });
    await eventsOnceListed(wallet.id, ["approval.requested"]);
    const stop = new AbortController();
    // A deadline for a broken run only; the assertions below say what arrived.
    const signal = AbortSignal.any([stop.signal, AbortSignal.timeout(120_000)]);
    const seen: string[] = [];
    let rejected = false;
    for await (const event of world.admin.events.iterate({
      walletId: wallet.id,
      follow: true,
      intervalMs: 100,
      signal,
    })) {
      seen.push(event.type);
      if (event.type === "approval.requested" && !rejected) {
        rejected = true;
        // Written after the iteration has read everything there was.
        await world.admin.approvals.reject(first.id);
      }
      if (event.type === "approval.rejected") stop.abort();
    }
    expect(stop.signal.aborted).toBe(true);
    expect(seen).toContain("approval.rejected");
    expect(seen.indexOf("approval.requested")).toBeLessThan(seen.indexOf("approval.rejected"));
  });

  it("an agent key sees its wallet's events only", async () => {
    const mineWallet = await world.admin.wallet.create({ name: "watched", chains: ["base"] });
    const otherWallet = await world.admin.wallet.create({ name: "unseen", chains: ["base"] });
    const { key } = await world.admin.apiKeys.create({
      name: "watcher",
      role: "agent",
      walletIds: [mineWallet.id],
    });
    const agent = world.client({ apiKey: key });
    await (await agent.wallet.get(mineWallet.id)).policy.update({ maxPerTx: "3" });
    await otherWallet.policy.update({ maxPerTx: "3" });
    await eventsOnceListed(otherWallet.id, ["policy.updated"]);
    const seen = await eventually(async () => {
      const { data } = await agent.events.list({ type: "policy.updated", limit: 100 });
      return data.length > 0 && data;
    });
    expect(new Set(seen.map((event) => (event.data as { walletId: string }).walletId))).toEqual(
      new Set([mineWallet.id]),
    );
    const refused = await agent.events.list({ walletId: otherWallet.id }).catch((e) => e);
    expect(refused).toMatchObject({ status: 404 });
  });
});
