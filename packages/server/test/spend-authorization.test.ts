import { startTestDaemon, type TestDaemon } from "@svc/authzd/testing";
import { fundEvm, fundSolana } from "@svc/devnet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { closeTokenAccount, devnetClients, solanaKey, tokenAccountRentUsd } from "./support/chains.ts";
import { waitForSettled } from "./support/spends.ts";
import {
  createTestServer,
  expectErrorShape,
  seedAccount,
  sharedDevnet,
  type TestServer,
} from "./support/test-server.ts";

const USDC = 1_000_000n;
const RECIPIENT = "0x1111111111111111111111111111111111111111";
const OTHER = "0x2222222222222222222222222222222222222222";

let daemon: TestDaemon;
let server: TestServer;
let owner: Awaited<ReturnType<typeof seedAccount>>;
let agentToken: string;
let serviceToken: string;
/** The facts of base as the service serves it: read from GET /v1/chains, like a client would. */
let base: { network: string; usdc: string };
let solanaNetwork: string;

beforeAll(async () => {
  daemon = await startTestDaemon();
  serviceToken = await daemon.identity("svc-service", ["wallet.spend.verify"]);
  agentToken = await daemon.identity("agent-1", ["wallet.spend.authorize", "wallet.spend.settle"], {
    budgetCredits: 1_000_000,
  });
  server = await createTestServer({
    env: { SVC_AUTHZD_URL: daemon.url, SVC_AUTHZD_TOKEN: serviceToken },
  });
  owner = await seedAccount(server.api);
  const chains = (await server.api.get("/v1/chains", owner.apiKey)).body as {
    name: string;
    network: string;
    tokens: { symbol: string; address: string }[];
  }[];
  const baseChain = chains.find((c) => c.name === "base");
  const usdc = baseChain?.tokens.find((t) => t.symbol === "USDC")?.address;
  if (!baseChain || !usdc) throw new Error("base USDC not served");
  base = { network: baseChain.network, usdc };
  solanaNetwork = chains.find((c) => c.name === "solana")?.network ?? "";
});
afterAll(async () => {
  await server?.close();
  await daemon?.stop();
});

async function fundedWallet(policy?: Record<string, unknown>) {
  const created = await server.api.post(
    "/v1/wallets",
    { name: "gated", chains: ["base"], ...(policy ? { policy } : {}) },
    owner.apiKey,
  );
  if (created.status !== 201) throw new Error(created.text);
  await fundEvm(await sharedDevnet(), created.body.evm.address, { eth: 10n ** 18n, usdc: 100n * USDC });
  return created.body as { id: string; evm: { address: string } };
}

/** What an amount of USDC (atomic units) is worth in the daemon's credits: US cents, at least 1. */
const creditsOf = (atomic: string | bigint) => Number((BigInt(atomic) + 9_999n) / 10_000n) || 1;

/** Asks the daemon, as the agent's identity, to approve a spend (of 2 USDC unless told); returns the decision. */
async function authorize(overrides: Record<string, unknown> = {}) {
  const amount = (overrides.amount as string | undefined) ?? "2000000";
  const reply = await daemon.call<{ approved: boolean; decision_id: string }>("POST", "/spend/authorize", {
    token: agentToken,
    body: {
      provider: "svc",
      network: base.network,
      asset: base.usdc,
      amount,
      per_call_cap: "5000000",
      credits: creditsOf(amount),
      destination: RECIPIENT,
      ...overrides,
    },
  });
  expect(reply.status).toBe(200);
  return reply.body;
}

const send = (walletId: string, body: Record<string, unknown>) =>
  server.api.post(`/v1/wallets/${walletId}/send`, { chain: "base", ...body }, owner.apiKey);

async function sendsOf(walletId: string): Promise<number> {
  return (await server.api.get(`/v1/wallets/${walletId}/transactions?type=send`, owner.apiKey)).body.total;
}

describe("a spend carrying spendAuthorization.decisionId", () => {
  it("is admitted when the daemon approved exactly this spend, and shows spendDecisionId", async () => {
    const wallet = await fundedWallet();
    const decision = await authorize();
    expect(decision.approved).toBe(true);
    const sent = await send(wallet.id, {
      to: RECIPIENT,
      amount: "2",
      spendAuthorization: { decisionId: decision.decision_id },
    });
    expect(sent.status).toBe(201);
    expect(sent.body.spendDecisionId).toBe(decision.decision_id);
    const settled = await waitForSettled(server.api, owner.apiKey, sent.body.id);
    expect(settled).toMatchObject({ status: "confirmed", spendDecisionId: decision.decision_id });
  });

  it("is refused when the decision is made up, denied or cancelled, and nothing is signed", async () => {
    const wallet = await fundedWallet();
    const denied = await authorize({ amount: "9000000" });
    expect(denied.approved).toBe(false);
    const cancelled = await authorize();
    expect(
      (
        await daemon.call("POST", "/spend/cancel", {
          token: agentToken,
          body: { decision_id: cancelled.decision_id },
        })
      ).status,
    ).toBe(200);
    const cases: [string, string, string, string][] = [
      ["made up", "dec_totally_made_up", "2", "is unknown to the authorization daemon"],
      ["denied", denied.decision_id, "9", "was denied"],
      ["cancelled", cancelled.decision_id, "2", "was cancelled"],
    ];
    for (const [why, decisionId, amount, message] of cases) {
      const response = await send(wallet.id, { to: RECIPIENT, amount, spendAuthorization: { decisionId } });
      expect(response.status, why).toBe(403);
      const error = expectErrorShape(response);
      expect(error, why).toMatchObject({ code: "PolicyViolation", reason: "spend_authorization_invalid" });
      expect(error.message, why).toContain(message);
    }
    expect(await sendsOf(wallet.id)).toBe(0);
  });

  it.each([
    ["amount", { amount: "3000000" }, "amount"],
    ["destination", { destination: OTHER }, "destination"],
    ["asset", { asset: "native" }, "asset"],
    ["network", { network: "eip155:1" }, "network"],
  ] as const)(
    "is refused when the decision's %s differs, naming the field",
    async (_name, overrides, field) => {
      const wallet = await fundedWallet();
      const decision = await authorize(overrides);
      expect(decision.approved).toBe(true);
      const response = await send(wallet.id, {
        to: RECIPIENT,
        amount: "2",
        spendAuthorization: { decisionId: decision.decision_id },
      });
      expect(response.status).toBe(403);
      const error = expectErrorShape(response);
      expect(error).toMatchObject({ code: "PolicyViolation", reason: "spend_authorization_mismatch" });
      expect(error.details).toMatchObject({ field });
      expect(error.message).toContain(`this spend's ${field} is`);
      expect(await sendsOf(wallet.id)).toBe(0);
      // The service consumed it, saw the mismatch and gave it back: the agent's credits are free again.
      const lookup = await daemon.call("GET", `/spend/decisions/${decision.decision_id}`, {
        token: serviceToken,
      });
      expect(lookup.body.state).toBe("released");
    },
  );

  it("is refused when its credits (what the agent said the spend is worth) are fewer than the spend is worth, and given back", async () => {
    const wallet = await fundedWallet();
    // 2 USDC is worth 200 credits (US cents); the agent claimed 1, so its budget would count 1.
    const cheap = await authorize({ credits: 1 });
    expect(cheap.approved).toBe(true);
    const refused = await send(wallet.id, {
      to: RECIPIENT,
      amount: "2",
      spendAuthorization: { decisionId: cheap.decision_id },
    });
    expect(refused.status).toBe(403);
    expect(expectErrorShape(refused)).toMatchObject({
      reason: "spend_authorization_mismatch",
      details: { field: "credits", authorized: "1", requested: "200" },
    });
    expect(await sendsOf(wallet.id)).toBe(0);
    const lookup = await daemon.call<{ state: string }>("GET", `/spend/decisions/${cheap.decision_id}`, {
      token: serviceToken,
    });
    expect(lookup.body.state).toBe("released");

    const priced = await authorize({ credits: 200 });
    const sent = await send(wallet.id, {
      to: RECIPIENT,
      amount: "2",
      spendAuthorization: { decisionId: priced.decision_id },
    });
    expect(sent.status, sent.text).toBe(201);
  });

  it("counts, in what a Solana send is worth against its credits, the rent of the token account it opens for its recipient", async () => {
    const devnet = await sharedDevnet();
    const created = await server.api.post(
      "/v1/wallets",
      { name: "gated sol", chains: ["solana"] },
      owner.apiKey,
    );
    expect(created.status, created.text).toBe(201);
    await fundSolana(devnet, created.body.solana.address, { sol: 10n ** 9n, usdc: 10n * USDC });
    const { solana } = await devnetClients(devnet);
    const rent = await tokenAccountRentUsd(devnet, solana.config.nativeToken);
    // 0.01 USDC is 1 credit; the token account it opens for a new recipient gives it rent worth far more.
    const worth = String((10_000n + rent + 9_999n) / 10_000n);
    const recipient = (await solanaKey()).address;
    const decisionFor = (credits: number) =>
      authorize({
        network: solanaNetwork,
        asset: devnet.solana.usdcMint,
        amount: "10000",
        destination: recipient,
        credits,
      });
    const sendWith = (decisionId: string) =>
      server.api.post(
        `/v1/wallets/${created.body.id}/send`,
        { chain: "solana", to: recipient, amount: "0.01", spendAuthorization: { decisionId } },
        owner.apiKey,
      );

    const tokenOnly = await decisionFor(1);
    const refused = await sendWith(tokenOnly.decision_id);
    expect(refused.status, refused.text).toBe(403);
    expect(expectErrorShape(refused)).toMatchObject({
      reason: "spend_authorization_mismatch",
      details: { field: "credits", authorized: "1", requested: worth },
    });
    expect(await sendsOf(created.body.id)).toBe(0);
    const lookup = await daemon.call<{ state: string }>("GET", `/spend/decisions/${tokenOnly.decision_id}`, {
      token: serviceToken,
    });
    expect(lookup.body.state).toBe("released");

    const priced = await decisionFor(Number(worth));
    const sent = await sendWith(priced.decision_id);
    expect(sent.status, sent.text).toBe(201);
  });

  it("a held Solana send is approved only while its decision's credits cover it: not once its recipient closed the token account it held", async () => {
    const devnet = await sharedDevnet();
    const created = await server.api.post(
      "/v1/wallets",
      { name: "held sol", chains: ["solana"], policy: { approvalAbove: "0.001" } },
      owner.apiKey,
    );
    expect(created.status, created.text).toBe(201);
    await fundSolana(devnet, created.body.solana.address, { sol: 10n ** 9n, usdc: 10n * USDC });
    const { solana } = await devnetClients(devnet);
    const recipient = await solanaKey();
    // The recipient holds a USDC account when the send is asked: 0.01 USDC is worth 1 credit, nothing more.
    await fundSolana(devnet, recipient.address, { sol: 10n ** 8n, usdc: 1n });
    const decision = await authorize({
      network: solanaNetwork,
      asset: devnet.solana.usdcMint,
      amount: "10000",
      destination: recipient.address,
      credits: 1,
    });
    const held = await server.api.post(
      `/v1/wallets/${created.body.id}/send`,
      {
        chain: "solana",
        to: recipient.address,
        amount: "0.01",
        spendAuthorization: { decisionId: decision.decision_id },
      },
      owner.apiKey,
    );
    expect(held.status, held.text).toBe(202);
    // Then it closes that account: approved now, the send would open a new one and give it the rent.
    await closeTokenAccount(
      devnet,
      recipient,
      solana.config.tokens[0] as (typeof solana.config.tokens)[number],
    );

    const approved = await server.api.post(`/v1/approvals/${held.body.id}/approve`, undefined, owner.apiKey);
    expect(approved.status, approved.text).toBe(403);
    expect(expectErrorShape(approved)).toMatchObject({
      reason: "spend_authorization_mismatch",
      details: { field: "credits", authorized: "1" },
    });
    const still = await server.api.get(`/v1/transactions/${held.body.id}`, owner.apiKey);
    expect(still.body.status).toBe("pending_approval");
  });

  it("is refused when the agent's authorize capability was revoked after the decision: nothing is signed", async () => {
    const wallet = await fundedWallet();
    const cutOffToken = await daemon.identity("agent-cut-off", ["wallet.spend.authorize"], {
      budgetCredits: 1000,
    });
    const reply = await daemon.call<{ approved: boolean; decision_id: string }>("POST", "/spend/authorize", {
      token: cutOffToken,
      body: {
        provider: "svc",
        network: base.network,
        asset: base.usdc,
        amount: "2000000",
        per_call_cap: "5000000",
        credits: creditsOf("2000000"),
        destination: RECIPIENT,
      },
    });
    expect(reply.body.approved).toBe(true);
    const revoked = await daemon.call("POST", "/capabilities/revoke", {
      token: daemon.operatorToken,
      body: { identity: "agent-cut-off", capability: "wallet.spend.authorize" },
    });
    expect(revoked.status).toBe(200);
    const response = await send(wallet.id, {
      to: RECIPIENT,
      amount: "2",
      spendAuthorization: { decisionId: reply.body.decision_id },
    });
    expect(response.status, response.text).toBe(403);
    expect(expectErrorShape(response)).toMatchObject({
      reason: "spend_authorization_invalid",
      message: expect.stringMatching(/agent-cut-off, who may no longer authorize spends/),
    });
    expect(await sendsOf(wallet.id)).toBe(0);
  });

  it("admits one spend per decision: a second use is refused", async () => {
    const wallet = await fundedWallet();
    const decision = await authorize();
    const body = { to: RECIPIENT, amount: "2", spendAuthorization: { decisionId: decision.decision_id } };
    expect((await send(wallet.id, body)).status).toBe(201);
    const again = await send(wallet.id, body);
    expect(again.status).toBe(403);
    expect(expectErrorShape(again).reason).toBe("spend_authorization_used");
    expect(await sendsOf(wallet.id)).toBe(1);
  });

  it("a retry with the same Idempotency-Key carrying a new decision is answered from the first: one spend, the first decision", async () => {
    const wallet = await fundedWallet();
    const [first, second] = [await authorize(), await authorize()];
    const keyed = (decisionId: string, amount = "2") =>
      server.api.request("POST", `/v1/wallets/${wallet.id}/send`, {
        token: owner.apiKey,
        headers: { "idempotency-key": `retry-${wallet.id}` },
        body: { chain: "base", to: RECIPIENT, amount, spendAuthorization: { decisionId } },
      });
    const sent = await keyed(first.decision_id);
    expect(sent.status, sent.text).toBe(201);

    // The client's gate lost the answer and asked the daemon again before retrying.
    const retried = await keyed(second.decision_id);
    expect(retried.status, retried.text).toBe(201);
    expect(retried.headers.get("idempotent-replayed")).toBe("true");
    expect(retried.body).toMatchObject({ id: sent.body.id, spendDecisionId: first.decision_id });
    expect(await sendsOf(wallet.id)).toBe(1);

    // What is asked still counts: another amount under the key is another request.
    const changed = await keyed(second.decision_id, "3");
    expect(changed.status).toBe(409);
    expect(expectErrorShape(changed).reason).toBe("idempotency_key_reused");
  });

  it("admits exactly one of 50 concurrent sends carrying one decision", async () => {
    const wallet = await fundedWallet();
    const decision = await authorize();
    const body = { to: RECIPIENT, amount: "2", spendAuthorization: { decisionId: decision.decision_id } };
    const responses = await Promise.all(Array.from({ length: 50 }, () => send(wallet.id, body)));
    const statuses = responses.map((r) => r.status);
    expect(statuses.filter((s) => s === 201)).toHaveLength(1);
    for (const refused of responses.filter((r) => r.status !== 201))
      expect(expectErrorShape(refused)).toMatchObject({
        code: "PolicyViolation",
        reason: "spend_authorization_used",
      });
    expect(await sendsOf(wallet.id)).toBe(1);
    const { base: chain } = await devnetClients(await sharedDevnet());
    const admitted = responses.find((r) => r.status === 201);
    await waitForSettled(server.api, owner.apiKey, admitted?.body.id);
    const usdc = chain.config.tokens.find((t) => t.symbol === "USDC");
    if (!usdc) throw new Error("no USDC");
    expect(await chain.getBalance(wallet.evm.address, usdc)).toBe(98n * USDC);
  });

  it("requireSpendAuthorization refuses a spend without a decision; only admin turns it off", async () => {
    const wallet = await fundedWallet({ requireSpendAuthorization: true });
    const bare = await send(wallet.id, { to: RECIPIENT, amount: "1" });
    expect(bare.status).toBe(403);
    expect(expectErrorShape(bare)).toMatchObject({
      code: "PolicyViolation",
      reason: "spend_authorization_required",
    });
    const decision = await authorize({ amount: "1000000" });
    const gated = await send(wallet.id, {
      to: RECIPIENT,
      amount: "1",
      spendAuthorization: { decisionId: decision.decision_id },
    });
    expect(gated.status).toBe(201);
    const agent = await server.api.post(
      "/v1/api-keys",
      { name: "agent", walletIds: [wallet.id] },
      owner.accessToken,
    );
    const off = await server.api.request("PATCH", `/v1/wallets/${wallet.id}/policy`, {
      token: agent.body.key,
      body: { requireSpendAuthorization: false },
    });
    expect(expectErrorShape(off)).toMatchObject({ code: "Forbidden", reason: "insufficient_role" });
    expect(await sendsOf(wallet.id)).toBe(1);
  });

  it("a Solana decision cannot pay on base", async () => {
    const wallet = await fundedWallet();
    const decision = await authorize({ network: solanaNetwork });
    const response = await send(wallet.id, {
      to: RECIPIENT,
      amount: "2",
      spendAuthorization: { decisionId: decision.decision_id },
    });
    expect(expectErrorShape(response)).toMatchObject({ reason: "spend_authorization_mismatch" });
  });
});

/**
 * A daemon of its own (`daemonEnv`: its reservation time, its budget window) on a clock the test moves, a
 * service verifying with it, an account with a funded base wallet, and the daemon's approval of a 1 USDC
 * send from it to RECIPIENT.
 */
async function ownDaemonWorld(daemonEnv: Record<string, string>, policy?: Record<string, unknown>) {
  const daemon = await startTestDaemon(daemonEnv, { clockOffsetMs: 0 });
  const serviceToken = await daemon.identity("svc-service", ["wallet.spend.verify"]);
  const agent = await daemon.identity("agent", ["wallet.spend.authorize"]);
  const server = await createTestServer({
    env: { SVC_AUTHZD_URL: daemon.url, SVC_AUTHZD_TOKEN: serviceToken },
  });
  const close = async () => {
    await server.close();
    await daemon.stop();
  };
  try {
    const account = await seedAccount(server.api);
    const wallet = await server.api.post(
      "/v1/wallets",
      { name: "w", chains: ["base"], ...(policy ? { policy } : {}) },
      account.apiKey,
    );
    await fundEvm(await sharedDevnet(), wallet.body.evm.address, { eth: 10n ** 18n, usdc: 10n * USDC });
    const decision = await daemon.call<{ decision_id: string }>("POST", "/spend/authorize", {
      token: agent,
      body: {
        provider: "svc",
        network: base.network,
        asset: base.usdc,
        amount: "1000000",
        per_call_cap: "5000000",
        credits: creditsOf(1_000_000n),
        destination: RECIPIENT,
      },
    });
    const decisionId = decision.body.decision_id;
    const sendWithDecision = () =>
      server.api.post(
        `/v1/wallets/${wallet.body.id}/send`,
        { to: RECIPIENT, amount: "1", chain: "base", spendAuthorization: { decisionId } },
        account.apiKey,
      );
    return { daemon, serviceToken, server, account, decisionId, sendWithDecision, close };
  } catch (error) {
    await close();
    throw error;
  }
}

describe("decision verification against a daemon that expires approvals quickly", () => {
  it("refuses an approval past its reservation time", async () => {
    const world = await ownDaemonWorld({ AUTHZD_RESERVATION_TTL_SECONDS: "1" });
    try {
      // The daemon's clock moves past the reservation; the daemon itself reports the approval expired.
      await world.daemon.advanceClock(1000);
      const lookup = await world.daemon.call<{ state: string }>(
        "GET",
        `/spend/decisions/${world.decisionId}`,
        {
          token: world.serviceToken,
        },
      );
      expect(lookup.body.state).toBe("expired");
      const response = await world.sendWithDecision();
      expect(response.status).toBe(403);
      const error = expectErrorShape(response);
      expect(error.reason).toBe("spend_authorization_invalid");
      expect(error.message).toContain("expired at");
    } finally {
      await world.close();
    }
  });
});

describe("a held spend whose decision the daemon has forgotten", () => {
  it("is refused approval as spend_authorization_invalid, saying why, and stays waiting (it was a 502 saying the daemon was unavailable)", async () => {
    // Reserved for 1 s and counted for a 1 s window: the daemon forgets the decision 2 s after it.
    const world = await ownDaemonWorld(
      { AUTHZD_RESERVATION_TTL_SECONDS: "1", AUTHZD_BUDGET_WINDOW_SECONDS: "1" },
      { approvalAbove: "0.5" },
    );
    const { server, account } = world;
    try {
      const held = await world.sendWithDecision();
      expect(held.status, held.text).toBe(202);
      await world.daemon.advanceClock(2000);
      const forgotten = await world.daemon.call("GET", `/spend/decisions/${world.decisionId}`, {
        token: world.serviceToken,
      });
      expect(forgotten.status).toBe(404);

      const approved = await server.api.post(
        `/v1/approvals/${held.body.id}/approve`,
        undefined,
        account.apiKey,
      );
      expect(approved.status, approved.text).toBe(403);
      const error = expectErrorShape(approved);
      expect(error).toMatchObject({
        code: "PolicyViolation",
        reason: "spend_authorization_invalid",
        details: { rule: "spendAuthorization", decisionId: world.decisionId },
      });
      expect(error.message).toContain("no longer knows");
      const still = await server.api.get(`/v1/transactions/${held.body.id}`, account.apiKey);
      expect(still.body.status).toBe("pending_approval");
      // Rejecting it is what ends it.
      const rejected = await server.api.post(
        `/v1/approvals/${held.body.id}/reject`,
        undefined,
        account.apiKey,
      );
      expect(rejected.status, rejected.text).toBe(200);
    } finally {
      await world.close();
    }
  });
});

describe("without a usable daemon", () => {
  it("a service configured without one refuses a decisionId with 400 authzd_not_configured", async () => {
    const plain = await createTestServer();
    try {
      const account = await seedAccount(plain.api);
      const wallet = await plain.api.post("/v1/wallets", { name: "w", chains: ["base"] }, account.apiKey);
      const response = await plain.api.post(
        `/v1/wallets/${wallet.body.id}/send`,
        {
          to: RECIPIENT,
          amount: "1",
          chain: "base",
          spendAuthorization: { decisionId: "dec_totally_made_up" },
        },
        account.apiKey,
      );
      expect(response.status).toBe(400);
      expect(expectErrorShape(response)).toMatchObject({
        code: "ValidationError",
        reason: "authzd_not_configured",
      });
      expect(
        (await plain.api.get(`/v1/wallets/${wallet.body.id}/transactions`, account.apiKey)).body.total,
      ).toBe(0);
    } finally {
      await plain.close();
    }
  });

  it("a daemon that does not answer refuses the spend with 502 authzd_unavailable, nothing signed", async () => {
    const down = await createTestServer({
      env: { SVC_AUTHZD_URL: "http://127.0.0.1:1", SVC_AUTHZD_TOKEN: "azd_unused" },
    });
    try {
      const account = await seedAccount(down.api);
      const wallet = await down.api.post("/v1/wallets", { name: "w", chains: ["base"] }, account.apiKey);
      await fundEvm(await sharedDevnet(), wallet.body.evm.address, { eth: 10n ** 18n, usdc: 10n * USDC });
      const decision = await authorize();
      const response = await down.api.post(
        `/v1/wallets/${wallet.body.id}/send`,
        {
          to: RECIPIENT,
          amount: "2",
          chain: "base",
          spendAuthorization: { decisionId: decision.decision_id },
        },
        account.apiKey,
      );
      expect(response.status).toBe(502);
      expect(expectErrorShape(response)).toMatchObject({
        code: "InternalError",
        reason: "authzd_unavailable",
      });
      expect(response.text).not.toContain("azd_unused");
      // Sends only: the watcher may already have recorded the funding transfer as a receive.
      expect(
        (await down.api.get(`/v1/wallets/${wallet.body.id}/transactions?type=send`, account.apiKey)).body
          .total,
      ).toBe(0);
    } finally {
      await down.close();
    }
  });
});

/**
 * A security review found that an agent could cancel a decision after the service had spent it, so the
 * credits came back: with a budget of 2, four spends were paid. The service now consumes the decision at
 * the daemon before signing, and the daemon refuses the agent's cancel of a consumed decision.
 */
describe("consumed decisions: the agent cannot take back the credits of a spend that was made", () => {
  let own: TestDaemon;
  let ownServer: TestServer;
  let account: Awaited<ReturnType<typeof seedAccount>>;
  let verifier: string;

  beforeAll(async () => {
    own = await startTestDaemon();
    verifier = await own.identity("svc-service", ["wallet.spend.verify"]);
    ownServer = await createTestServer({ env: { SVC_AUTHZD_URL: own.url, SVC_AUTHZD_TOKEN: verifier } });
    account = await seedAccount(ownServer.api);
  });
  afterAll(async () => {
    await ownServer?.close();
    await own?.stop();
  });

  async function ownWallet(policy?: Record<string, unknown>) {
    const created = await ownServer.api.post(
      "/v1/wallets",
      { name: "consumed", chains: ["base"], ...(policy ? { policy } : {}) },
      account.apiKey,
    );
    if (created.status !== 201) throw new Error(created.text);
    await fundEvm(await sharedDevnet(), created.body.evm.address, { eth: 10n ** 18n, usdc: 100n * USDC });
    return created.body as { id: string };
  }

  /** A spend worth `credits` (US cents): that many hundredths of a USDC. */
  const authorizeAs = (token: string, credits: number, amount = String(credits * 10_000)) =>
    own.call<{ approved: boolean; decision_id: string; reason?: string }>("POST", "/spend/authorize", {
      token,
      body: {
        provider: "svc",
        network: base.network,
        asset: base.usdc,
        amount,
        per_call_cap: "5000000",
        credits,
        destination: RECIPIENT,
      },
    });
  const cancelAs = (token: string, decisionId: string) =>
    own.call<{ code?: string }>("POST", "/spend/cancel", { token, body: { decision_id: decisionId } });
  const usdcOf = (credits: number) => `0.${String(credits).padStart(2, "0")}`;
  const sendWith = (walletId: string, decisionId: string, amount: string) =>
    ownServer.api.post(
      `/v1/wallets/${walletId}/send`,
      { chain: "base", to: RECIPIENT, amount, spendAuthorization: { decisionId } },
      account.apiKey,
    );
  const budgetOf = async (name: string) =>
    (
      await own.call<{ available_credits: number; reserved_credits: number }>("GET", `/budgets/${name}`, {
        token: own.operatorToken,
      })
    ).body;
  const stateOf = async (decisionId: string) =>
    (await own.call<{ state: string }>("GET", `/spend/decisions/${decisionId}`, { token: verifier })).body
      .state;
  const ownSends = async (walletId: string) =>
    (await ownServer.api.get(`/v1/wallets/${walletId}/transactions?type=send`, account.apiKey)).body.total;

  it.each([
    [2, 1],
    [1, 2],
  ])(
    "the review's attack (budget 2, %i credits a spend, cancel after each send) pays only %i spend(s); the cancel is 409 decision_consumed and the budget stays spent",
    async (credits, paid) => {
      const name = `agent-c${credits}`;
      const agent = await own.identity(name, ["wallet.spend.authorize", "wallet.spend.settle"], {
        budgetCredits: 2,
      });
      const wallet = await ownWallet();
      let sent = 0;
      const denials: string[] = [];
      for (let attempt = 0; attempt < 4; attempt++) {
        const verdict = await authorizeAs(agent, credits);
        if (!verdict.body.approved) {
          denials.push(verdict.body.reason ?? "");
          continue;
        }
        const response = await sendWith(wallet.id, verdict.body.decision_id, usdcOf(credits));
        expect(response.status, response.text).toBe(201);
        sent++;
        const cancelled = await cancelAs(agent, verdict.body.decision_id);
        expect(cancelled.status).toBe(409);
        expect(cancelled.body.code).toBe("decision_consumed");
        expect(await budgetOf(name)).toMatchObject({ available_credits: 2 - sent * credits });
      }
      expect(sent).toBe(paid);
      expect(await ownSends(wallet.id)).toBe(paid);
      expect(denials).toHaveLength(4 - paid);
      for (const reason of denials) expect(reason).toMatch(/^budget exceeded/);
      expect(await budgetOf(name)).toMatchObject({ available_credits: 0, reserved_credits: 2 });
    },
  );

  it("of a concurrent cancel and send with one decision exactly one succeeds, 20 times over", async () => {
    const agent = await own.identity("agent-race", ["wallet.spend.authorize", "wallet.spend.settle"], {
      budgetCredits: 100,
    });
    const wallet = await ownWallet();
    const outcomes = { sent: 0, cancelled: 0 };
    for (let pair = 0; pair < 20; pair++) {
      const verdict = await authorizeAs(agent, 1);
      const decisionId = verdict.body.decision_id;
      // Either order of arrival; the jitter only varies which one the daemon sees first.
      const jitter = () => new Promise((resolve) => setTimeout(resolve, Math.random() * 40 * (pair % 3)));
      const [sent, cancelled] = await Promise.all([
        sendWith(wallet.id, decisionId, usdcOf(1)),
        jitter().then(() => cancelAs(agent, decisionId)),
      ]);
      const both = JSON.stringify([sent.body, cancelled.body]);
      if (sent.status === 201) {
        expect(cancelled.status, both).toBe(409);
        expect(cancelled.body.code, both).toBe("decision_consumed");
        expect(await stateOf(decisionId)).toBe("consumed");
        outcomes.sent++;
      } else {
        expect(cancelled.status, both).toBe(200);
        expect(sent.status, both).toBe(403);
        expect(expectErrorShape(sent), both).toMatchObject({
          code: "PolicyViolation",
          reason: "spend_authorization_invalid",
        });
        expect(await stateOf(decisionId)).toBe("cancelled");
        outcomes.cancelled++;
      }
    }
    expect(outcomes.sent + outcomes.cancelled).toBe(20);
    expect(await ownSends(wallet.id)).toBe(outcomes.sent);
    // Every spend made still holds its credit; every cancelled decision gave its back.
    expect(await budgetOf("agent-race")).toMatchObject({
      reserved_credits: outcomes.sent,
      available_credits: 100 - outcomes.sent,
    });
  });

  it("a spend refused by the policy (over maxPerTx) with a valid decision gives the credits back", async () => {
    const agent = await own.identity("agent-limited", ["wallet.spend.authorize", "wallet.spend.settle"], {
      budgetCredits: 10,
    });
    const wallet = await ownWallet({ maxPerTx: "0.01" });
    const verdict = await authorizeAs(agent, 3);
    expect(verdict.body.approved).toBe(true);
    expect(await budgetOf("agent-limited")).toMatchObject({ available_credits: 7 });
    const refused = await sendWith(wallet.id, verdict.body.decision_id, usdcOf(3));
    expect(refused.status).toBe(403);
    expect(expectErrorShape(refused)).toMatchObject({ code: "PolicyViolation", reason: "max_per_tx" });
    expect(await ownSends(wallet.id)).toBe(0);
    expect(await budgetOf("agent-limited")).toMatchObject({ available_credits: 10, reserved_credits: 0 });
    expect(await stateOf(verdict.body.decision_id)).toBe("released");
    // Given back for good: it pays for nothing any more, and the agent's own cancel is told so.
    const again = await sendWith(wallet.id, verdict.body.decision_id, usdcOf(3));
    expect(expectErrorShape(again)).toMatchObject({ reason: "spend_authorization_invalid" });
    expect((await cancelAs(agent, verdict.body.decision_id)).body.code).toBe("decision_released");
  });

  it("a consumed decision stays consumed across a daemon restart: the cancel is still refused, the budget still spent", async () => {
    const agent = await own.identity("agent-restart", ["wallet.spend.authorize", "wallet.spend.settle"], {
      budgetCredits: 2,
    });
    const wallet = await ownWallet();
    const verdict = await authorizeAs(agent, 2);
    expect((await sendWith(wallet.id, verdict.body.decision_id, usdcOf(2))).status).toBe(201);

    await own.restart();

    const cancelled = await cancelAs(agent, verdict.body.decision_id);
    expect(cancelled.status).toBe(409);
    expect(cancelled.body.code).toBe("decision_consumed");
    expect(await stateOf(verdict.body.decision_id)).toBe("consumed");
    expect(await budgetOf("agent-restart")).toMatchObject({ available_credits: 0, reserved_credits: 2 });
    const next = await authorizeAs(agent, 1);
    expect(next.body.approved).toBe(false);
    expect(next.body.reason).toMatch(/^budget exceeded/);
  });
});
