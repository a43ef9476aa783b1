import { fundEvm } from "@svc/devnet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createTestServer,
  expectErrorShape,
  seedAccount,
  sharedDevnet,
  type TestServer,
} from "./support/test-server.ts";

let server: TestServer;
let owner: Awaited<ReturnType<typeof seedAccount>>;

const USDC = 1_000_000n;
const RECIPIENT = "0x1111111111111111111111111111111111111111";
const OTHER = "0x2222222222222222222222222222222222222222";
const MINUTE = 60_000;

beforeAll(async () => {
  server = await createTestServer();
  owner = await seedAccount(server.api);
});
afterAll(() => server.close());

async function createWallet(policy?: Record<string, unknown>) {
  const response = await server.api.post(
    "/v1/wallets",
    { name: "agent wallet", chains: ["base"], ...(policy ? { policy } : {}) },
    owner.accessToken,
  );
  if (response.status !== 201) throw new Error(response.text);
  return response.body as { id: string; evm: { address: `0x${string}` } };
}

async function createKey(body: Record<string, unknown>): Promise<{ id: string; key: string }> {
  const response = await server.api.post("/v1/api-keys", { name: "k", ...body }, owner.accessToken);
  if (response.status !== 201) throw new Error(response.text);
  return response.body;
}

const policyOf = async (walletId: string) =>
  (await server.api.get(`/v1/wallets/${walletId}/policy`, owner.accessToken)).body;

function expectForbidden(response: Awaited<ReturnType<typeof server.api.get>>, needed = "admin") {
  expect(response.status).toBe(403);
  const error = expectErrorShape(response);
  expect(error).toMatchObject({ code: "Forbidden", reason: "insufficient_role" });
  expect(error.message).toMatch(new RegExp(`needs? an ${needed} credential`));
}

describe("API key records", () => {
  it("show role, walletIds and expiresAt on create and list; agent is the default role", async () => {
    const wallet = await createWallet();
    const expiresAt = new Date(Date.now() + 3_600_000).toISOString();
    const created = await server.api.post(
      "/v1/api-keys",
      { name: "bound reader", role: "read", walletIds: [wallet.id], expiresAt },
      owner.accessToken,
    );
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ role: "read", walletIds: [wallet.id], expiresAt, lastUsed: null });
    const plain = await createKey({});
    const listed = (await server.api.get("/v1/api-keys", owner.accessToken)).body as Record<
      string,
      unknown
    >[];
    expect(listed.find((k) => k.id === created.body.id)).toMatchObject({
      role: "read",
      walletIds: [wallet.id],
      expiresAt,
    });
    expect(listed.find((k) => k.id === plain.id)).toMatchObject({
      role: "agent",
      walletIds: null,
      expiresAt: null,
    });
  });

  it("refuses an admin key bound to wallets, an expiry in the past, and another account's wallet", async () => {
    const wallet = await createWallet();
    const adminBound = await server.api.post(
      "/v1/api-keys",
      { name: "x", role: "admin", walletIds: [wallet.id] },
      owner.accessToken,
    );
    expect(adminBound.status).toBe(400);
    expect(expectErrorShape(adminBound).message).toContain("admin keys cannot be bound to wallets");
    const past = await server.api.post(
      "/v1/api-keys",
      { name: "x", expiresAt: "2020-01-01T00:00:00Z" },
      owner.accessToken,
    );
    expect(past.status).toBe(400);
    expect(expectErrorShape(past).message).toContain("must be in the future");
    const stranger = await seedAccount(server.api, "stranger");
    const foreign = await server.api.post(
      "/v1/api-keys",
      { name: "x", walletIds: [wallet.id] },
      stranger.accessToken,
    );
    expect(foreign.status).toBe(404);
    expect((await server.api.get("/v1/api-keys", stranger.accessToken)).body).toHaveLength(1);
  });

  it("an expired key answers 401 key_expired", async () => {
    const key = await createKey({ expiresAt: new Date(Date.now() + 10 * MINUTE).toISOString() });
    expect((await server.api.get("/v1/wallets", key.key)).status).toBe(200);
    // The service's clock moves past the expiry, as a ten-minute wait would (the owner's hour-long
    // access token stays valid).
    server.clock.advance(11 * MINUTE);
    try {
      const response = await server.api.get("/v1/wallets", key.key);
      expect(response.status).toBe(401);
      expect(expectErrorShape(response)).toMatchObject({ code: "Unauthorized", reason: "key_expired" });
      // The owner still sees it, with its expiry, and may revoke it; then it leaves the list.
      const listed = (await server.api.get("/v1/api-keys", owner.accessToken)).body;
      const expired = listed.find((k: any) => k.id === key.id);
      expect(new Date(expired?.expiresAt).getTime()).toBeLessThan(Date.now() + 11 * MINUTE);
      expect((await server.api.delete(`/v1/api-keys/${key.id}`, owner.accessToken)).status).toBe(204);
      expect(
        (await server.api.get("/v1/api-keys", owner.accessToken)).body.map((k: any) => k.id),
      ).not.toContain(key.id);
    } finally {
      server.clock.reset();
    }
  });
});

describe("GET /v1/me", () => {
  it("tells each credential what it is: the owner's token, an agent key bound to wallets, a read key", async () => {
    const wallet = await createWallet();
    const asToken = await server.api.get("/v1/me", owner.accessToken);
    expect(asToken.status).toBe(200);
    expect(asToken.body).toEqual({
      userId: expect.stringMatching(/^usr_/),
      email: owner.email,
      role: "admin",
      apiKey: null,
    });

    const agent = await createKey({ name: "shopper", role: "agent", walletIds: [wallet.id] });
    const asAgent = await server.api.get("/v1/me", agent.key);
    expect(asAgent.body).toMatchObject({
      userId: asToken.body.userId,
      role: "agent",
      apiKey: { id: agent.id, name: "shopper", role: "agent", walletIds: [wallet.id], expiresAt: null },
    });
    expect(asAgent.text).not.toContain(agent.key);
    // An agent reads untrusted text: it is not given its owner's address (before, it was).
    expect(asAgent.text).not.toContain(owner.email);

    const reader = await createKey({ role: "read" });
    const asReader = await server.api.get("/v1/me", reader.key);
    expect(asReader.body).toMatchObject({ role: "read", apiKey: { id: reader.id, walletIds: null } });
    expect(asReader.text).not.toContain(owner.email);
    // The admin API key the seed made answers as admin, with its record and the account's email.
    expect((await server.api.get("/v1/me", owner.apiKey)).body).toMatchObject({
      email: owner.email,
      role: "admin",
      apiKey: { role: "admin" },
    });
  });

  it("answers 401 without a credential and for a revoked key", async () => {
    expect((await server.api.get("/v1/me")).status).toBe(401);
    const agent = await createKey({ role: "agent" });
    expect((await server.api.delete(`/v1/api-keys/${agent.id}`, owner.accessToken)).status).toBe(204);
    const revoked = await server.api.get("/v1/me", agent.key);
    expect(revoked.status).toBe(401);
    expect(expectErrorShape(revoked).reason).toBe("key_revoked");
  });
});

describe("an agent key", () => {
  it("cannot create, list or revoke other keys, but may revoke itself", async () => {
    const agent = await createKey({ role: "agent" });
    expectForbidden(await server.api.post("/v1/api-keys", { name: "escape", role: "admin" }, agent.key));
    expectForbidden(await server.api.post("/v1/api-keys", { name: "escape" }, agent.key));
    expectForbidden(await server.api.get("/v1/api-keys", agent.key));
    expectForbidden(await server.api.delete(`/v1/api-keys/${owner.apiKeyId}`, agent.key));
    // The owner's key still works.
    expect((await server.api.get("/v1/wallets", owner.apiKey)).status).toBe(200);
    expect((await server.api.delete(`/v1/api-keys/${agent.id}`, agent.key)).status).toBe(204);
    expect((await server.api.get("/v1/wallets", agent.key)).status).toBe(401);
  });

  it("cannot create wallets", async () => {
    const agent = await createKey({});
    expectForbidden(await server.api.post("/v1/wallets", { name: "w", chains: ["base"] }, agent.key));
    expect(
      (await server.api.get("/v1/wallets", owner.accessToken)).body.map((w: any) => w.name),
    ).not.toContain("w");
  });

  const loosenings: [string, Record<string, unknown>, Record<string, unknown>][] = [
    ["raising maxPerTx", { maxPerTx: "10" }, { maxPerTx: "11" }],
    ["removing maxPerTx", { maxPerTx: "10" }, { maxPerTx: null }],
    ["raising dailyLimit", { dailyLimit: "50" }, { dailyLimit: 50.01 }],
    ["removing dailyLimit", { dailyLimit: "50" }, { dailyLimit: null }],
    ["raising alertAbove", { alertAbove: "5" }, { alertAbove: "6" }],
    ["removing alertAbove", { alertAbove: "5" }, { alertAbove: null }],
    ["adding a whitelist entry", { whitelist: [RECIPIENT] }, { whitelist: [RECIPIENT, OTHER] }],
    ["replacing a whitelist entry", { whitelist: [RECIPIENT] }, { whitelist: [OTHER] }],
    ["emptying the whitelist", { whitelist: [RECIPIENT] }, { whitelist: [] }],
    [
      "turning off requireSpendAuthorization",
      { requireSpendAuthorization: true },
      { requireSpendAuthorization: false },
    ],
    [
      "one loosening hidden among tightenings",
      { maxPerTx: "10", dailyLimit: "50" },
      { maxPerTx: "5", dailyLimit: "500" },
    ],
  ];
  it.each(loosenings)("%s → 403 Forbidden and the policy unchanged", async (_name, start, change) => {
    const wallet = await createWallet(start);
    const agent = await createKey({ walletIds: [wallet.id] });
    const before = await policyOf(wallet.id);
    expectForbidden(
      await server.api.request("PATCH", `/v1/wallets/${wallet.id}/policy`, {
        token: agent.key,
        body: change,
      }),
    );
    expect(await policyOf(wallet.id)).toEqual(before);
  });

  const tightenings: [string, Record<string, unknown>, Record<string, unknown>, Record<string, unknown>][] = [
    ["lowering maxPerTx", { maxPerTx: "10" }, { maxPerTx: "9.99" }, { maxPerTx: "9.99" }],
    ["setting maxPerTx where there was none", {}, { maxPerTx: "3" }, { maxPerTx: "3" }],
    ["lowering dailyLimit", { dailyLimit: "50" }, { dailyLimit: 20 }, { dailyLimit: "20" }],
    ["setting alertAbove", {}, { alertAbove: "1" }, { alertAbove: "1" }],
    [
      "narrowing the whitelist",
      { whitelist: [RECIPIENT, OTHER] },
      { whitelist: [OTHER.toUpperCase().replace("0X", "0x")] },
      { whitelist: [OTHER.toUpperCase().replace("0X", "0x")] },
    ],
    [
      "starting a whitelist where any recipient was allowed",
      {},
      { whitelist: [RECIPIENT] },
      { whitelist: [RECIPIENT] },
    ],
    [
      "requiring spend authorizations",
      {},
      { requireSpendAuthorization: true },
      { requireSpendAuthorization: true },
    ],
    ["repeating the current values", { maxPerTx: "10" }, { maxPerTx: "10" }, { maxPerTx: "10" }],
  ];
  it.each(tightenings)("%s → 200", async (_name, start, change, expected) => {
    const wallet = await createWallet(start);
    const agent = await createKey({ walletIds: [wallet.id] });
    const response = await server.api.request("PATCH", `/v1/wallets/${wallet.id}/policy`, {
      token: agent.key,
      body: change,
    });
    expect(response.status).toBe(200);
    expect(response.body).toMatchObject(expected);
    expect(await policyOf(wallet.id)).toMatchObject(expected);
  });

  it("may pause but not resume", async () => {
    const wallet = await createWallet();
    const agent = await createKey({ walletIds: [wallet.id] });
    const paused = await server.api.post(`/v1/wallets/${wallet.id}/policy/pause`, undefined, agent.key);
    expect(paused.status).toBe(200);
    expect(paused.body.status).toBe("paused");
    expectForbidden(await server.api.post(`/v1/wallets/${wallet.id}/policy/resume`, undefined, agent.key));
    expect((await policyOf(wallet.id)).status).toBe("paused");
    const resumed = await server.api.post(`/v1/wallets/${wallet.id}/policy/resume`, undefined, owner.apiKey);
    expect(resumed.body.status).toBe("active");
  });

  it("racing the owner's tightening, never ends the policy looser than the owner left it", async () => {
    // Serialized either way, the owner's change (50 → 10, [A, B, C] → [A]) is the last word: after it, the
    // agent's (→ 30, → [A, B]) raises a bound and adds an entry, and is refused. An agent's change checked
    // against the policy as it was before the owner's committed, and written after, would leave it looser.
    const THIRD = "0x3333333333333333333333333333333333333333";
    for (let round = 0; round < 12; round++) {
      const wallet = await createWallet({ maxPerTx: "50", whitelist: [RECIPIENT, OTHER, THIRD] });
      const agent = await createKey({ walletIds: [wallet.id] });
      const path = `/v1/wallets/${wallet.id}/policy`;
      const [ownerAnswer, agentAnswer] = await Promise.all([
        server.api.request("PATCH", path, {
          token: owner.apiKey,
          body: { maxPerTx: "10", whitelist: [RECIPIENT] },
        }),
        server.api.request("PATCH", path, {
          token: agent.key,
          body: { maxPerTx: "30", whitelist: [RECIPIENT, OTHER] },
        }),
      ]);
      expect(ownerAnswer.status).toBe(200);
      expect([200, 403]).toContain(agentAnswer.status);
      expect(await policyOf(wallet.id), `round ${round}`).toMatchObject({
        maxPerTx: "10",
        whitelist: [RECIPIENT],
      });
    }
  });

  it("reads its wallets, sends within the policy, uses the faucet and archives", async () => {
    const devnet = await sharedDevnet();
    const wallet = await createWallet({ maxPerTx: "5" });
    await fundEvm(devnet, wallet.evm.address, { eth: 10n ** 18n, usdc: 100n * USDC });
    const agent = await createKey({ walletIds: [wallet.id] });
    for (const path of ["", "/policy", "/balance", "/transactions"])
      expect((await server.api.get(`/v1/wallets/${wallet.id}${path}`, agent.key)).status).toBe(200);
    const sent = await server.api.post(
      `/v1/wallets/${wallet.id}/send`,
      { to: RECIPIENT, amount: "1", chain: "base" },
      agent.key,
    );
    expect(sent.status).toBe(201);
    expect((await server.api.get(`/v1/transactions/${sent.body.id}`, agent.key)).status).toBe(200);
    const faucet = await server.api.post(
      `/v1/wallets/${wallet.id}/faucet`,
      { chain: "base", token: "USDC", amount: "1" },
      agent.key,
    );
    expect(faucet.status).toBe(201);
    expect((await server.api.delete(`/v1/wallets/${wallet.id}`, agent.key)).status).toBe(204);
  });
});

describe("the attack from the issue, replayed with the agent's own key", () => {
  it("ends with the over-limit send refused, the policy intact and no new credential", async () => {
    const devnet = await sharedDevnet();
    const wallet = await createWallet({ maxPerTx: "5", dailyLimit: "10" });
    await fundEvm(devnet, wallet.evm.address, { eth: 10n ** 18n, usdc: 100n * USDC });
    const agent = await createKey({ walletIds: [wallet.id] });
    const over = { to: RECIPIENT, amount: "50", chain: "base" };
    const refused = await server.api.post(`/v1/wallets/${wallet.id}/send`, over, agent.key);
    expect(expectErrorShape(refused)).toMatchObject({ code: "PolicyViolation", reason: "max_per_tx" });

    const policy = await policyOf(wallet.id);
    // Pause then resume, to come back with a "fresh" policy: the resume is refused.
    expect(
      (await server.api.post(`/v1/wallets/${wallet.id}/policy/pause`, undefined, agent.key)).status,
    ).toBe(200);
    expectForbidden(await server.api.post(`/v1/wallets/${wallet.id}/policy/resume`, undefined, agent.key));
    const removal = await server.api.request("PATCH", `/v1/wallets/${wallet.id}/policy`, {
      token: agent.key,
      body: { maxPerTx: null, dailyLimit: null },
    });
    expectForbidden(removal);
    // One sentence naming every refused change.
    expect(expectErrorShape(removal).message).toMatch(
      /^Removing maxPerTx \(\$[\d.]+\) and removing dailyLimit \(\$[\d.]+\) need an admin credential; this request was made with an agent key/,
    );
    expect(await policyOf(wallet.id)).toMatchObject({
      maxPerTx: policy.maxPerTx,
      dailyLimit: policy.dailyLimit,
      status: "paused",
    });
    // A better key of its own, and the owner's key revoked: both refused.
    expectForbidden(await server.api.post("/v1/api-keys", { name: "mine", role: "admin" }, agent.key));
    expectForbidden(await server.api.delete(`/v1/api-keys/${owner.apiKeyId}`, agent.key));

    const again = await server.api.post(`/v1/wallets/${wallet.id}/send`, over, agent.key);
    expect(again.status).toBe(403);
    expect(expectErrorShape(again).code).toBe("PolicyViolation");
    const history = await server.api.get(`/v1/wallets/${wallet.id}/transactions?type=send`, owner.apiKey);
    expect(history.body.total).toBe(0);
  });
});

describe("a read key", () => {
  it("reads everything an agent reads, and every non-GET answers 403", async () => {
    const wallet = await createWallet();
    const reader = await createKey({ role: "read" });
    for (const path of [
      "/v1/wallets",
      `/v1/wallets/${wallet.id}`,
      `/v1/wallets/${wallet.id}/policy`,
      `/v1/wallets/${wallet.id}/balance`,
      `/v1/wallets/${wallet.id}/transactions`,
      "/v1/chains",
    ])
      expect((await server.api.get(path, reader.key)).status, path).toBe(200);
    const writes: [string, string, unknown][] = [
      ["POST", "/v1/wallets", { name: "w", chains: ["base"] }],
      ["DELETE", `/v1/wallets/${wallet.id}`, undefined],
      ["POST", `/v1/wallets/${wallet.id}/send`, { to: RECIPIENT, amount: "1", chain: "base" }],
      ["POST", `/v1/wallets/${wallet.id}/faucet`, { chain: "base", token: "USDC" }],
      ["PATCH", `/v1/wallets/${wallet.id}/policy`, { maxPerTx: "1" }],
      ["POST", `/v1/wallets/${wallet.id}/policy/pause`, undefined],
      ["POST", `/v1/wallets/${wallet.id}/policy/resume`, undefined],
      ["POST", "/v1/api-keys", { name: "x" }],
      ["DELETE", `/v1/api-keys/${owner.apiKeyId}`, undefined],
    ];
    for (const [method, path, body] of writes) {
      const response = await server.api.request(method, path, {
        token: reader.key,
        ...(body === undefined ? {} : { body }),
      });
      expect(response.status, `${method} ${path}`).toBe(403);
      expect(expectErrorShape(response).reason).toBe("insufficient_role");
    }
    expect(await policyOf(wallet.id)).toMatchObject({ maxPerTx: null, status: "active" });
    expect((await server.api.get(`/v1/wallets/${wallet.id}`, owner.apiKey)).body.status).toBe("active");
  });
});

describe("a key bound to one wallet", () => {
  it("sees only that wallet: every route on another wallet answers 404, as if it were absent", async () => {
    const mine = await createWallet();
    const other = await createWallet();
    const devnet = await sharedDevnet();
    await fundEvm(devnet, other.evm.address, { eth: 10n ** 18n, usdc: 10n * USDC });
    const otherSend = await server.api.post(
      `/v1/wallets/${other.id}/send`,
      { to: RECIPIENT, amount: "1", chain: "base" },
      owner.apiKey,
    );
    expect(otherSend.status).toBe(201);
    const bound = await createKey({ walletIds: [mine.id] });

    const listed = (await server.api.get("/v1/wallets", bound.key)).body.map((w: { id: string }) => w.id);
    expect(listed).toEqual([mine.id]);
    const routes: [string, string, unknown][] = [
      ["GET", `/v1/wallets/${other.id}`, undefined],
      ["GET", `/v1/wallets/${other.id}/policy`, undefined],
      ["GET", `/v1/wallets/${other.id}/balance`, undefined],
      ["GET", `/v1/wallets/${other.id}/transactions`, undefined],
      ["GET", `/v1/transactions/${otherSend.body.id}`, undefined],
      ["POST", `/v1/wallets/${other.id}/send`, { to: RECIPIENT, amount: "1", chain: "base" }],
      ["POST", `/v1/wallets/${other.id}/faucet`, { chain: "base", token: "USDC" }],
      ["PATCH", `/v1/wallets/${other.id}/policy`, { maxPerTx: "1" }],
      ["POST", `/v1/wallets/${other.id}/policy/pause`, undefined],
      ["DELETE", `/v1/wallets/${other.id}`, undefined],
    ];
    for (const [method, path, body] of routes) {
      const response = await server.api.request(method, path, {
        token: bound.key,
        ...(body === undefined ? {} : { body }),
      });
      expect(response.status, `${method} ${path}`).toBe(404);
      expect(expectErrorShape(response).code).toBe("NotFound");
    }
    expect((await server.api.get(`/v1/wallets/${other.id}`, owner.apiKey)).body.status).toBe("active");
    expect(await policyOf(other.id)).toMatchObject({ maxPerTx: null, status: "active" });
    expect((await server.api.get(`/v1/wallets/${mine.id}`, bound.key)).status).toBe(200);
  });
});
