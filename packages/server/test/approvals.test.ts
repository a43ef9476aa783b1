import { fundEvm } from "@svc/devnet";
import { sql } from "drizzle-orm";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { ChainClient } from "../src/chains/types.ts";
import type { ApiResponse } from "./support/api-client.ts";
import { devnetClients } from "./support/chains.ts";
import { eventually } from "./support/eventually.ts";
import { RpcGate } from "./support/rpc-gate.ts";
import { waitForSettled } from "./support/spends.ts";
import {
  createTestServer,
  evmThroughGate,
  expectErrorShape,
  seedAccount,
  sharedDevnet,
  type TestServer,
} from "./support/test-server.ts";

const USDC = 1_000_000n;
const ETH = 10n ** 18n;
const DEAD = "0x000000000000000000000000000000000000dEaD";
const TTL_SECONDS = 600;

let server: TestServer;
let owner: Awaited<ReturnType<typeof seedAccount>>;
let base: ChainClient;

beforeAll(async () => {
  const devnet = await sharedDevnet();
  // Approvals expire by the service's clock, which the expiry test moves forward instead of waiting.
  server = await createTestServer({ env: { SVC_APPROVAL_TTL_SECONDS: String(TTL_SECONDS) } });
  owner = await seedAccount(server.api);
  ({ base } = await devnetClients(devnet));
});
afterAll(() => server.close());

const usdc = () => base.config.tokens.find((token) => token.symbol === "USDC") ?? base.config.nativeToken;

async function fundedWallet(policy: Record<string, unknown>) {
  const created = await server.api.post(
    "/v1/wallets",
    { name: "held", chains: ["base"], policy },
    owner.apiKey,
  );
  expect(created.status, created.text).toBe(201);
  await fundEvm(await sharedDevnet(), created.body.evm.address, { eth: ETH, usdc: 100n * USDC });
  return created.body as { id: string; evm: { address: `0x${string}` } };
}

const send = (walletId: string, amount: string, token = owner.apiKey, to = DEAD) =>
  server.api.post(`/v1/wallets/${walletId}/send`, { to, amount, token: "USDC", chain: "base" }, token);

/**
 * A wallet's events of one type, once there is one (an event is listed when every transaction older than
 * its own has ended, a moment after its change commits).
 */
async function eventsOf(walletId: string, type: string, about?: string) {
  return eventually(async () => {
    const page = await server.api.get(`/v1/events?walletId=${walletId}&type=${type}&limit=100`, owner.apiKey);
    expect(page.status, page.text).toBe(200);
    const events = page.body.data as { type: string; data: Record<string, any> }[];
    const relevant = about === undefined ? events : events.filter((event) => event.data.id === about);
    return relevant.length > 0 && relevant;
  });
}

describe("a spend above approvalAbove", () => {
  it("is answered 202 pending_approval, signs and sends nothing, and is listed with its deadline", async () => {
    const wallet = await fundedWallet({ approvalAbove: "5" });
    const before = await base.getBalance(wallet.evm.address, usdc());
    const held = await send(wallet.id, "7");
    expect(held.status, held.text).toBe(202);
    expect(held.body).toMatchObject({
      status: "pending_approval",
      amount: "7",
      approval: { status: "pending" },
    });
    expect(held.body.txHash).toBeUndefined();
    const deadline = Date.parse(held.body.approval.expiresAt) - Date.parse(held.body.timestamp);
    expect(deadline).toBe(TTL_SECONDS * 1000);

    const listed = await server.api.get("/v1/approvals?status=pending", owner.apiKey);
    expect(listed.status).toBe(200);
    expect(listed.body.data).toContainEqual(
      expect.objectContaining({
        id: held.body.id,
        status: "pending_approval",
        expiresAt: held.body.approval.expiresAt,
      }),
    );
    // A spend at or below the bound goes out as usual.
    expect((await send(wallet.id, "5")).status).toBe(201);
    expect((await eventsOf(wallet.id, "transaction.created")).map((e) => e.data.id)).toContain(held.body.id);
    expect((await eventsOf(wallet.id, "approval.requested")).map((e) => e.data.id)).toEqual([held.body.id]);
    // Nothing of the held spend reached the chain: only the $5 send moves the balance.
    const sent = (await server.api.get(`/v1/wallets/${wallet.id}/transactions`, owner.apiKey)).body.data;
    await waitForSettled(server.api, owner.apiKey, sent.find((t: any) => t.amount === "5").id);
    expect(await base.getBalance(wallet.evm.address, usdc())).toBe(before - 5n * USDC);
  });

  it("approved by an admin: signed and broadcast through the pipeline, confirmed on chain, decided once", async () => {
    const wallet = await fundedWallet({ approvalAbove: "5" });
    const before = await base.getBalance(wallet.evm.address, usdc());
    const held = await send(wallet.id, "8");
    expect(held.status).toBe(202);

    const approved = await server.api.post(`/v1/approvals/${held.body.id}/approve`, undefined, owner.apiKey);
    expect(approved.status, approved.text).toBe(200);
    expect(approved.body).toMatchObject({
      id: held.body.id,
      status: "pending",
      approval: { status: "approved" },
    });
    expect(approved.body.txHash).toBeTruthy();
    const settled = await waitForSettled(server.api, owner.apiKey, held.body.id);
    expect(settled.status).toBe("confirmed");
    expect(await base.getBalance(wallet.evm.address, usdc())).toBe(before - 8n * USDC);

    for (const decision of ["approve", "reject"]) {
      const again = await server.api.post(
        `/v1/approvals/${held.body.id}/${decision}`,
        undefined,
        owner.apiKey,
      );
      expect(again.status).toBe(409);
      expect(expectErrorShape(again).reason).toBe("already_decided");
    }
    expect((await eventsOf(wallet.id, "approval.approved")).map((e) => e.data.id)).toEqual([held.body.id]);
    const approvedList = await server.api.get("/v1/approvals?status=approved", owner.apiKey);
    expect(approvedList.body.data.map((t: any) => t.id)).toContain(held.body.id);
  });

  it("holds no nonce while it waits: a send admitted after it and the held one, approved, use the next two", async () => {
    const wallet = await fundedWallet({ approvalAbove: "5" });
    const held = await send(wallet.id, "9");
    expect(held.status, held.text).toBe(202);
    const after = await send(wallet.id, "1");
    expect(after.status, after.text).toBe(201);
    expect((await waitForSettled(server.api, owner.apiKey, after.body.id)).status).toBe("confirmed");
    const approved = await server.api.post(`/v1/approvals/${held.body.id}/approve`, undefined, owner.apiKey);
    expect(approved.status, approved.text).toBe(200);
    expect((await waitForSettled(server.api, owner.apiKey, held.body.id)).status).toBe("confirmed");
    // Two transactions on chain from the wallet, nonces 0 and 1: no gap was left for the confirmer to fill.
    expect(await base.getMinedNonce?.(wallet.evm.address)).toBe(2);
    const history = await server.api.get(`/v1/wallets/${wallet.id}/transactions?type=send`, owner.apiKey);
    expect(history.body.data.map((t: { id: string }) => t.id).sort()).toEqual(
      [held.body.id, after.body.id].sort(),
    );
  });

  it("rejected: ends rejected, the daily limit has its room back, nothing on chain", async () => {
    const wallet = await fundedWallet({ approvalAbove: "5", dailyLimit: "10" });
    const before = await base.getBalance(wallet.evm.address, usdc());
    const held = await send(wallet.id, "6");
    expect(held.status).toBe(202);
    // The held $6 holds its place: $5 more would pass the $10 limit.
    const over = await send(wallet.id, "5");
    expect(over.status).toBe(403);
    expect(expectErrorShape(over).reason).toBe("daily_limit");

    const rejected = await server.api.post(`/v1/approvals/${held.body.id}/reject`, undefined, owner.apiKey);
    expect(rejected.status, rejected.text).toBe(200);
    expect(rejected.body).toMatchObject({
      status: "rejected",
      failureReason: "approval_rejected",
      approval: { status: "rejected" },
    });
    const room = await send(wallet.id, "5");
    expect(room.status, room.text).toBe(201);
    await waitForSettled(server.api, owner.apiKey, room.body.id);
    expect(await base.getBalance(wallet.evm.address, usdc())).toBe(before - 5n * USDC);
    expect((await eventsOf(wallet.id, "approval.rejected")).map((e) => e.data.id)).toEqual([held.body.id]);
    const approve = await server.api.post(`/v1/approvals/${held.body.id}/approve`, undefined, owner.apiKey);
    expect(expectErrorShape(approve).reason).toBe("already_decided");
  });

  it("asked for by an agent key that is then revoked: ends rejected (requester_revoked), its room given back; another key's spend waits on", async () => {
    const wallet = await fundedWallet({ approvalAbove: "1", dailyLimit: "10" });
    const agentKey = async (name: string) => {
      const created = await server.api.post("/v1/api-keys", { name, role: "agent" }, owner.accessToken);
      expect(created.status, created.text).toBe(201);
      return created.body as { id: string; key: string };
    };
    const revoked = await agentKey("talked into it");
    const other = await agentKey("well behaved");
    const held = [await send(wallet.id, "3", revoked.key), await send(wallet.id, "3", revoked.key)];
    const othersHeld = await send(wallet.id, "3", other.key);
    for (const answer of [...held, othersHeld]) expect(answer.status, answer.text).toBe(202);
    // $9 of $10 is held: the other agent's next $3 does not fit.
    expect(expectErrorShape(await send(wallet.id, "3", other.key)).reason).toBe("daily_limit");

    expect((await server.api.delete(`/v1/api-keys/${revoked.id}`, owner.accessToken)).status).toBe(204);
    for (const answer of held) {
      const ended = await server.api.get(`/v1/transactions/${answer.body.id}`, owner.apiKey);
      expect(ended.body).toMatchObject({
        status: "rejected",
        failureReason: "requester_revoked",
        approval: { status: "rejected" },
      });
    }
    expect((await server.api.get(`/v1/transactions/${othersHeld.body.id}`, owner.apiKey)).body).toMatchObject(
      {
        status: "pending_approval",
      },
    );
    const rejectedEvents = await eventsOf(wallet.id, "approval.rejected");
    expect(rejectedEvents.map((e) => e.data.id).sort()).toEqual(held.map((a) => a.body.id).sort());
    // Their $6 is free again.
    expect((await send(wallet.id, "3", other.key)).status).toBe(202);
    // Revoking it again ends nothing more and answers the same.
    expect((await server.api.delete(`/v1/api-keys/${revoked.id}`, owner.accessToken)).status).toBe(204);
    const approve = await server.api.post(
      `/v1/approvals/${held[0]?.body.id}/approve`,
      undefined,
      owner.apiKey,
    );
    expect(expectErrorShape(approve)).toMatchObject({
      reason: "already_decided",
      message: expect.stringContaining("already decided: rejected (requester_revoked)"),
      details: { approval: "rejected", failureReason: "requester_revoked" },
    });
  });

  it("revoking two keys at once, each holding spends of one wallet from two different hours, ends them all (no deadlock between the revocations)", async () => {
    const HOUR = 3_600_000;
    for (let trial = 0; trial < 3; trial++) {
      const wallet = await fundedWallet({ approvalAbove: "1", dailyLimit: "100000" });
      const keys = await Promise.all(
        ["first", "second"].map(async (name) => {
          const created = await server.api.post("/v1/api-keys", { name, role: "agent" }, owner.apiKey);
          return created.body as { id: string; key: string };
        }),
      );
      const holdSpends = async () => {
        for (let i = 0; i < 12; i++)
          for (const key of keys) expect((await send(wallet.id, "1.5", key.key)).status).toBe(202);
      };
      // Half of them a minute before an hour begins, half a minute after: two hourly buckets of the daily
      // window, each spend well within its approval deadline.
      server.clock.jumpTo(new Date(Math.ceil(Date.now() / HOUR) * HOUR + HOUR - 60_000));
      try {
        await holdSpends();
        server.clock.advance(2 * 60_000);
        await holdSpends();
        const revocations = await Promise.all(
          keys.map((key) => server.api.delete(`/v1/api-keys/${key.id}`, owner.apiKey)),
        );
        expect(revocations.map((r) => r.status)).toEqual([204, 204]);
        const stillHeld = await server.api.get("/v1/approvals?status=pending&limit=100", owner.apiKey);
        expect(stillHeld.body.data.filter((a: { walletId: string }) => a.walletId === wallet.id)).toEqual([]);
      } finally {
        server.clock.reset();
      }
    }
  });

  it("not decided before its deadline: expires rejected, its room given back", async () => {
    const wallet = await fundedWallet({ approvalAbove: "5", dailyLimit: "10" });
    const held = await send(wallet.id, "9");
    expect(held.status).toBe(202);
    await server.service.confirmer.runOnce();
    expect((await server.api.get(`/v1/transactions/${held.body.id}`, owner.apiKey)).body.status).toBe(
      "pending_approval",
    );
    server.clock.advance(TTL_SECONDS * 1000 + 1);
    let expired: any;
    try {
      // The confirmer's next pass ends it.
      expired = await eventually(
        async () => {
          const read = await server.api.get(`/v1/transactions/${held.body.id}`, owner.apiKey);
          return read.body.status === "pending_approval" ? undefined : read.body;
        },
        { describe: "the held spend to expire" },
      );
    } finally {
      server.clock.reset();
    }
    expect(expired).toMatchObject({
      status: "rejected",
      failureReason: "approval_expired",
      approval: { status: "expired" },
    });
    expect((await send(wallet.id, "5")).status).toBe(201);
    expect((await eventsOf(wallet.id, "approval.expired")).map((e) => e.data.id)).toEqual([held.body.id]);
    const listed = await server.api.get("/v1/approvals?status=expired", owner.apiKey);
    expect(listed.body.data.map((t: any) => t.id)).toContain(held.body.id);
  });

  it("approved, counts in the daily limit from its approval, when it was sent, not from when it was asked", async () => {
    const wallet = await fundedWallet({ approvalAbove: "5", dailyLimit: "10" });
    try {
      const held = await send(wallet.id, "9");
      expect(held.status, held.text).toBe(202);
      const askedAt = Date.parse(held.body.timestamp);
      // Approved nine minutes later: the $9 leaves the wallet then.
      server.clock.jumpTo(new Date(askedAt + 9 * 60_000));
      const approved = await server.api.post(
        `/v1/approvals/${held.body.id}/approve`,
        undefined,
        owner.apiKey,
      );
      expect(approved.status, approved.text).toBe(200);
      // Dated when it was sent (the service's clock runs on from where it was moved).
      const sentAt = Date.parse(approved.body.timestamp);
      expect(sentAt - askedAt).toBeGreaterThanOrEqual(9 * 60_000);
      expect(sentAt - askedAt).toBeLessThan(10 * 60_000);
      expect((await waitForSettled(server.api, owner.apiKey, held.body.id)).status).toBe("confirmed");
      // A day after it was asked for, less than a day after it was sent: still counted, $5 more does not fit.
      server.clock.jumpTo(new Date(askedAt + 24 * 60 * 60_000 + 1_000));
      const spending = await server.api.get(`/v1/wallets/${wallet.id}/spending`, owner.apiKey);
      expect(spending.body.used).toBe("9.00");
      const more = await send(wallet.id, "5");
      expect(more.status, more.text).toBe(403);
      expect(expectErrorShape(more).reason).toBe("daily_limit");
    } finally {
      server.clock.reset();
    }
  });

  it("is checked against the policy again when approved: a refusal leaves it waiting", async () => {
    const wallet = await fundedWallet({ approvalAbove: "5" });
    const held = await send(wallet.id, "7");
    expect(
      (await server.api.post(`/v1/wallets/${wallet.id}/policy/pause`, undefined, owner.apiKey)).status,
    ).toBe(200);
    const refused = await server.api.post(`/v1/approvals/${held.body.id}/approve`, undefined, owner.apiKey);
    expect(refused.status).toBe(403);
    expect(expectErrorShape(refused).reason).toBe("policy_paused");
    expect((await server.api.get(`/v1/transactions/${held.body.id}`, owner.apiKey)).body.status).toBe(
      "pending_approval",
    );
    // Lowering maxPerTx under it refuses it too; once the owner allows it again, it goes out.
    await server.api.post(`/v1/wallets/${wallet.id}/policy/resume`, undefined, owner.apiKey);
    await server.api.request("PATCH", `/v1/wallets/${wallet.id}/policy`, {
      token: owner.apiKey,
      body: { maxPerTx: "6" },
    });
    const capped = await server.api.post(`/v1/approvals/${held.body.id}/approve`, undefined, owner.apiKey);
    expect(expectErrorShape(capped).reason).toBe("max_per_tx");
    await server.api.request("PATCH", `/v1/wallets/${wallet.id}/policy`, {
      token: owner.apiKey,
      body: { maxPerTx: null },
    });
    const approved = await server.api.post(`/v1/approvals/${held.body.id}/approve`, undefined, owner.apiKey);
    expect(approved.status, approved.text).toBe(200);
    expect((await waitForSettled(server.api, owner.apiKey, held.body.id)).status).toBe("confirmed");
  });

  it("to a recipient found since to be one where funds are lost, is refused 400 invalid_address and left waiting", async () => {
    const wallet = await fundedWallet({ approvalAbove: "5" });
    const held = await send(wallet.id, "7");
    expect(held.status, held.text).toBe(202);
    // Held before the service knew its recipient for a token's contract (a hold from an earlier version, or
    // before the token was configured): the row is pointed there as such a hold would be.
    const contract = usdc().address ?? "";
    await server.service.store.db.execute(
      sql`UPDATE transactions SET to_address = ${contract} WHERE id = ${held.body.id}`,
    );
    const refused = await server.api.post(`/v1/approvals/${held.body.id}/approve`, undefined, owner.apiKey);
    expect(refused.status, refused.text).toBe(400);
    expect(expectErrorShape(refused)).toMatchObject({ reason: "invalid_address" });
    expect(expectErrorShape(refused).message).toContain("the USDC contract");
    const after = (await server.api.get(`/v1/transactions/${held.body.id}`, owner.apiKey)).body;
    expect(after.status).toBe("pending_approval");
    expect(after.txHash).toBeUndefined();
  });

  it("on a wallet archived meanwhile, is refused 409 wallet_archived, whatever the wallet holds", async () => {
    const created = await server.api.post(
      "/v1/wallets",
      { name: "held", chains: ["base"], policy: { approvalAbove: "5" } },
      owner.apiKey,
    );
    await fundEvm(await sharedDevnet(), created.body.evm.address, { eth: ETH, usdc: 10n * USDC });
    const held = await send(created.body.id, "7");
    expect(held.status, held.text).toBe(202);
    // The wallet spends below the bound meanwhile: what it holds no longer covers the held spend.
    const spent = await send(created.body.id, "4");
    expect(spent.status, spent.text).toBe(201);
    await waitForSettled(server.api, owner.apiKey, spent.body.id);
    expect(
      (await server.api.request("DELETE", `/v1/wallets/${created.body.id}`, { token: owner.apiKey })).status,
    ).toBe(204);
    const refused = await server.api.post(`/v1/approvals/${held.body.id}/approve`, undefined, owner.apiKey);
    expect(refused.status, refused.text).toBe(409);
    expect(expectErrorShape(refused).reason).toBe("wallet_archived");
  });

  it("20 concurrent approves sign and broadcast it once; approves racing rejects decide once", async () => {
    const wallet = await fundedWallet({ approvalAbove: "1" });
    const before = await base.getBalance(wallet.evm.address, usdc());
    const held = await send(wallet.id, "3");
    const answers = await Promise.all(
      Array.from({ length: 20 }, () =>
        server.api.post(`/v1/approvals/${held.body.id}/approve`, undefined, owner.apiKey),
      ),
    );
    expect(answers.map((a) => a.status).sort()).toEqual([200, ...Array(19).fill(409)]);
    await waitForSettled(server.api, owner.apiKey, held.body.id);
    expect(await base.getBalance(wallet.evm.address, usdc())).toBe(before - 3n * USDC);
    const history = (await server.api.get(`/v1/wallets/${wallet.id}/transactions`, owner.apiKey)).body.data;
    expect(history.filter((t: any) => t.type === "send")).toHaveLength(1);

    const raced = await send(wallet.id, "2");
    const decisions = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        server.api.post(
          `/v1/approvals/${raced.body.id}/${i % 2 ? "reject" : "approve"}`,
          undefined,
          owner.apiKey,
        ),
      ),
    );
    expect(decisions.filter((d) => d.status === 200)).toHaveLength(1);
    expect(decisions.filter((d) => d.status === 409)).toHaveLength(9);
    const winner = decisions.find((d) => d.status === 200)?.body;
    const events = await eventsOf(wallet.id, "approval.approved,approval.rejected", raced.body.id);
    expect(events).toHaveLength(1);
    expect(events[0]?.data.approval.status).toBe(winner.approval.status);
  });

  it("cannot be decided by an agent key (403), nor by another account (404)", async () => {
    const wallet = await fundedWallet({ approvalAbove: "1" });
    const held = await send(wallet.id, "2");
    const agent = await server.api.post(
      "/v1/api-keys",
      { name: "agent", role: "agent", walletIds: [wallet.id] },
      owner.apiKey,
    );
    for (const decision of ["approve", "reject"]) {
      const refused = await server.api.post(
        `/v1/approvals/${held.body.id}/${decision}`,
        undefined,
        agent.body.key,
      );
      expect(refused.status).toBe(403);
      expect(expectErrorShape(refused).code).toBe("Forbidden");
    }
    // The agent sees its wallet's approvals, and another account sees none of them.
    const seen = await server.api.get("/v1/approvals", agent.body.key);
    expect(seen.body.data.map((t: any) => t.id)).toContain(held.body.id);
    const stranger = await seedAccount(server.api, "stranger");
    const foreign = await server.api.post(
      `/v1/approvals/${held.body.id}/approve`,
      undefined,
      stranger.apiKey,
    );
    expect(foreign.status).toBe(404);
    expect((await server.api.get("/v1/approvals", stranger.apiKey)).body.data).toEqual([]);
    expect((await server.api.get(`/v1/transactions/${held.body.id}`, owner.apiKey)).body.status).toBe(
      "pending_approval",
    );
  });

  it("tightening approvalAbove is an agent's to make, loosening it an admin's", async () => {
    const wallet = await fundedWallet({ approvalAbove: "5" });
    const agent = await server.api.post(
      "/v1/api-keys",
      { name: "agent", role: "agent", walletIds: [wallet.id] },
      owner.apiKey,
    );
    const patch = (approvalAbove: string | null) =>
      server.api.request("PATCH", `/v1/wallets/${wallet.id}/policy`, {
        token: agent.body.key,
        body: { approvalAbove },
      });
    expect((await patch("2")).body.approvalAbove).toBe("2");
    expect((await patch("10")).status).toBe(403);
    expect((await patch(null)).status).toBe(403);
    const policy = await server.api.get(`/v1/wallets/${wallet.id}/policy`, owner.apiKey);
    expect(policy.body.approvalAbove).toBe("2");
  });

  it("asked for at once with sends below the bound, then approved at once: what leaves the wallet never passes the daily limit", async () => {
    const wallet = await fundedWallet({ approvalAbove: "2", dailyLimit: "10" });
    const before = await base.getBalance(wallet.evm.address, usdc());
    const amounts = [3, 1, 1, 3, 1, 1, 3, 1, 1, 3, 1, 1];
    const asked = await Promise.all(amounts.map((amount) => send(wallet.id, String(amount))));
    const admitted = asked.flatMap((answer, i) =>
      answer.status === 201 || answer.status === 202 ? [i] : [],
    );
    const refused = asked.flatMap((answer, i) => (answer.status === 403 ? [i] : []));
    expect(admitted.length + refused.length, asked.map((a) => a.text).join("\n")).toBe(amounts.length);
    for (const i of refused) expect(expectErrorShape(asked[i] as ApiResponse).reason).toBe("daily_limit");
    const reserved = admitted.reduce((sum, i) => sum + (amounts[i] ?? 0), 0);
    // As much as fits: the room left is less than any refused spend.
    expect(reserved).toBeLessThanOrEqual(10);
    for (const i of refused) expect(10 - reserved).toBeLessThan(amounts[i] ?? 0);

    const held = admitted.filter((i) => asked[i]?.status === 202).map((i) => asked[i]?.body.id as string);
    const approvals = await Promise.all(
      held.map((id) => server.api.post(`/v1/approvals/${id}/approve`, undefined, owner.apiKey)),
    );
    for (const approval of approvals) expect(approval.status, approval.text).toBe(200);
    for (const i of admitted) await waitForSettled(server.api, owner.apiKey, asked[i]?.body.id);
    expect(await base.getBalance(wallet.evm.address, usdc())).toBe(before - BigInt(reserved) * USDC);
    const spending = await server.api.get(`/v1/wallets/${wallet.id}/spending`, owner.apiKey);
    expect(spending.body.used).toBe(`${reserved}.00`);
  });
});

describe("a held spend past its deadline, the confirmer not yet come by to end it", () => {
  let gate: RpcGate;
  let slow: TestServer;
  let apiKey: string;

  beforeAll(async () => {
    gate = await RpcGate.start((await sharedDevnet()).evm.rpcUrl);
    // A confirmer that passes only at start: nothing but the approval itself sees the deadline go by.
    slow = await createTestServer({
      env: {
        ...(await evmThroughGate(gate)),
        SVC_APPROVAL_TTL_SECONDS: String(TTL_SECONDS),
        SVC_CONFIRMER_INTERVAL_MS: "3600000",
      },
    });
    ({ apiKey } = await seedAccount(slow.api));
  });
  afterAll(async () => {
    await slow?.close();
    await gate?.close();
  });
  afterEach(() => {
    gate.openUp();
    slow.clock.reset();
  });

  /** A spend of 9 USDC held for approval, of a new wallet with a daily limit of 10 dollars. */
  async function heldSpend() {
    const created = await slow.api.post(
      "/v1/wallets",
      { name: "held", chains: ["base"], policy: { approvalAbove: "5", dailyLimit: "10" } },
      apiKey,
    );
    await fundEvm(await sharedDevnet(), created.body.evm.address, { eth: ETH, usdc: 100n * USDC });
    const held = await slow.api.post(
      `/v1/wallets/${created.body.id}/send`,
      { to: DEAD, amount: "9", token: "USDC", chain: "base" },
      apiKey,
    );
    expect(held.status).toBe(202);
    return { walletId: created.body.id as string, id: held.body.id as string };
  }

  /** A decision answers 409 expired, and the spend is ended so: unsigned, its room given back, not listed waiting. */
  async function expectEndedExpired(walletId: string, id: string, decision: ApiResponse) {
    expect(decision.status, decision.text).toBe(409);
    expect(expectErrorShape(decision)).toMatchObject({
      reason: "already_decided",
      details: { approval: "expired" },
    });
    const read = await slow.api.get(`/v1/transactions/${id}`, apiKey);
    expect(read.body).toMatchObject({
      status: "rejected",
      failureReason: "approval_expired",
      approval: { status: "expired" },
    });
    expect(read.body.txHash).toBeUndefined();
    const waiting = await slow.api.get("/v1/approvals?status=pending", apiKey);
    expect(waiting.body.data.map((t: { id: string }) => t.id)).not.toContain(id);
    slow.clock.reset();
    const next = await slow.api.post(
      `/v1/wallets/${walletId}/send`,
      { to: DEAD, amount: "5", token: "USDC", chain: "base" },
      apiKey,
    );
    expect(next.status, next.text).toBe(201);
  }

  it("cannot be approved: it ends expired then (it was approved and sent)", async () => {
    const { walletId, id } = await heldSpend();
    slow.clock.advance(TTL_SECONDS * 1000 + 1);
    await expectEndedExpired(
      walletId,
      id,
      await slow.api.post(`/v1/approvals/${id}/approve`, undefined, apiKey),
    );
  });

  it("cannot be rejected either: it ends expired, as the deadline decided (it ended approval_rejected)", async () => {
    const { walletId, id } = await heldSpend();
    slow.clock.advance(TTL_SECONDS * 1000 + 1);
    await expectEndedExpired(
      walletId,
      id,
      await slow.api.post(`/v1/approvals/${id}/reject`, undefined, apiKey),
    );
  });

  it("raced by its approval, its rejection and its asking key revoking itself, ends one way; the daily window holds exactly what was sent", async () => {
    const created = await slow.api.post(
      "/v1/wallets",
      { name: "raced", chains: ["base"], policy: { approvalAbove: "1", dailyLimit: "100" } },
      apiKey,
    );
    const wallet = created.body as { id: string; evm: { address: `0x${string}` } };
    await fundEvm(await sharedDevnet(), wallet.evm.address, { eth: ETH, usdc: 100n * USDC });
    const before = await base.getBalance(wallet.evm.address, usdc());
    let sent = 0;
    for (let round = 0; round < 8; round++) {
      const agent = await slow.api.post("/v1/api-keys", { name: `racer ${round}`, role: "agent" }, apiKey);
      const held = await slow.api.post(
        `/v1/wallets/${wallet.id}/send`,
        { to: DEAD, amount: "2", token: "USDC", chain: "base" },
        agent.body.key,
      );
      expect(held.status, held.text).toBe(202);
      // The rejection and the revocation are asked for as the approval has read the chain and goes for the
      // wallet's lock: each of the three may take the held row first.
      let others: Promise<[ApiResponse, ApiResponse]> | undefined;
      gate.decide = (call) => {
        if (!others && call.methods.includes("eth_estimateGas"))
          others = Promise.all([
            slow.api.post(`/v1/approvals/${held.body.id}/reject`, undefined, apiKey),
            slow.api.delete(`/v1/api-keys/${agent.body.id}`, agent.body.key),
          ]);
        return "forward";
      };
      const approve = await slow.api.post(`/v1/approvals/${held.body.id}/approve`, undefined, apiKey);
      gate.decide = () => "forward";
      expect(others).toBeDefined();
      const [reject, revoke] = await (others as Promise<[ApiResponse, ApiResponse]>);
      expect(revoke.status, revoke.text).toBe(204);
      const ended = (await slow.api.get(`/v1/transactions/${held.body.id}`, apiKey)).body;
      if (approve.status === 200) {
        expect(expectErrorShape(reject).reason, reject.text).toBe("already_decided");
        expect(ended).toMatchObject({ approval: { status: "approved" } });
        expect(ended.txHash).toBeTruthy();
        sent++;
      } else {
        expect(expectErrorShape(approve).reason, approve.text).toBe("already_decided");
        const why = reject.status === 200 ? "approval_rejected" : "requester_revoked";
        expect(ended).toMatchObject({
          status: "rejected",
          failureReason: why,
          approval: { status: "rejected" },
        });
        expect(ended.txHash).toBeUndefined();
      }
    }
    // Each approved spend left the wallet once, and the window holds those and nothing of the others.
    await eventually(
      async () => (await base.getBalance(wallet.evm.address, usdc())) === before - BigInt(sent) * 2n * USDC,
    );
    const spending = await slow.api.get(`/v1/wallets/${wallet.id}/spending`, apiKey);
    expect(spending.body.used).toBe(`${sent * 2}.00`);
  });

  it("cannot be approved when the deadline goes by while the approval reads the chain", async () => {
    const { walletId, id } = await heldSpend();
    let moved = false;
    gate.decide = (call) => {
      if (!moved && call.methods.includes("eth_estimateGas")) {
        moved = true;
        slow.clock.advance(TTL_SECONDS * 1000 + 1);
      }
      return "forward";
    };
    const approve = await slow.api.post(`/v1/approvals/${id}/approve`, undefined, apiKey);
    expect(moved).toBe(true);
    await expectEndedExpired(walletId, id, approve);
  });
});
