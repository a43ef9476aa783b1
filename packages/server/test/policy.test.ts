import { type Devnet, fundEvm, startDevnet } from "@svc/devnet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testnetProfileOnLocalChains } from "./support/chains.ts";
import { createTestServer, expectErrorShape, seedAccount, type TestServer } from "./support/test-server.ts";

let server: TestServer;
let apiKey: string;
beforeAll(async () => {
  server = await createTestServer();
  ({ apiKey } = await seedAccount(server.api));
});
afterAll(() => server.close());

async function newWallet(policy?: Record<string, unknown>): Promise<string> {
  const response = await server.api.post(
    "/v1/wallets",
    { name: "p", chains: ["base"], ...(policy ? { policy } : {}) },
    apiKey,
  );
  return response.body.id;
}

describe("the spending policy resource", () => {
  it("starts with no bounds, active, and reads back what creation set", async () => {
    const plain = await server.api.get(`/v1/wallets/${await newWallet()}/policy`, apiKey);
    expect(plain.status).toBe(200);
    expect(plain.body).toMatchObject({
      maxPerTx: null,
      dailyLimit: null,
      alertAbove: null,
      whitelist: [],
      status: "active",
    });
    const id = await newWallet({ maxPerTx: "10.5", dailyLimit: 50 });
    const set = await server.api.get(`/v1/wallets/${id}/policy`, apiKey);
    expect(set.body).toMatchObject({ walletId: id, maxPerTx: "10.5", dailyLimit: "50" });
  });

  it("PATCH changes only the fields given, and null removes a bound", async () => {
    const id = await newWallet({ maxPerTx: "10", dailyLimit: "50" });
    const patched = await server.api.request("PATCH", `/v1/wallets/${id}/policy`, {
      token: apiKey,
      body: { dailyLimit: "75.25", whitelist: ["0x000000000000000000000000000000000000dEaD"] },
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({
      maxPerTx: "10",
      dailyLimit: "75.25",
      whitelist: ["0x000000000000000000000000000000000000dEaD"],
    });
    const cleared = await server.api.request("PATCH", `/v1/wallets/${id}/policy`, {
      token: apiKey,
      body: { maxPerTx: null },
    });
    expect(cleared.body).toMatchObject({ maxPerTx: null, dailyLimit: "75.25" });
  });

  it("pauses and resumes", async () => {
    const id = await newWallet();
    const paused = await server.api.post(`/v1/wallets/${id}/policy/pause`, undefined, apiKey);
    expect(paused.status).toBe(200);
    expect(paused.body.status).toBe("paused");
    const resumed = await server.api.post(`/v1/wallets/${id}/policy/resume`, undefined, apiKey);
    expect(resumed.body.status).toBe("active");
  });

  it("on an archived wallet, refuses every loosening with 409 wallet_archived, even the owner's, and allows tightening", async () => {
    const [a, b, c] = [
      "0x000000000000000000000000000000000000dEaD",
      "0x1111111111111111111111111111111111111111",
      "0x2222222222222222222222222222222222222222",
    ];
    const id = await newWallet({
      maxPerTx: "10",
      dailyLimit: "50",
      whitelist: [a, b],
      requireSpendAuthorization: true,
    });
    expect((await server.api.post(`/v1/wallets/${id}/policy/pause`, undefined, apiKey)).status).toBe(200);
    expect((await server.api.delete(`/v1/wallets/${id}`, apiKey)).status).toBe(204);
    const agent = await server.api.post("/v1/api-keys", { name: "agent", role: "agent" }, apiKey);
    const patch = (body: unknown, token = apiKey) =>
      server.api.request("PATCH", `/v1/wallets/${id}/policy`, { token, body });
    for (const body of [
      { maxPerTx: "20" },
      { dailyLimit: null },
      { whitelist: [a, c] },
      { whitelist: [] },
      { requireSpendAuthorization: false },
      // A tightening beside a loosening: the whole change is refused.
      { maxPerTx: "5", dailyLimit: "100" },
    ]) {
      const response = await patch(body);
      expect(response.status, JSON.stringify(body)).toBe(409);
      expect(expectErrorShape(response)).toMatchObject({
        code: "ValidationError",
        reason: "wallet_archived",
        message: `Wallet ${id} is archived`,
      });
    }
    // The wallet's state, not the credential, is what refuses: an agent key is told the same.
    expect(expectErrorShape(await patch({ maxPerTx: "20" }, agent.body.key)).reason).toBe("wallet_archived");
    const resumed = await server.api.post(`/v1/wallets/${id}/policy/resume`, undefined, apiKey);
    expect(resumed.status).toBe(409);
    expect(expectErrorShape(resumed).reason).toBe("wallet_archived");

    const tightened = await patch({ maxPerTx: "5", whitelist: [a] });
    expect(tightened.status).toBe(200);
    expect((await server.api.post(`/v1/wallets/${id}/policy/pause`, undefined, apiKey)).status).toBe(200);
    expect((await server.api.get(`/v1/wallets/${id}/policy`, apiKey)).body).toMatchObject({
      maxPerTx: "5",
      dailyLimit: "50",
      whitelist: [a],
      requireSpendAuthorization: true,
      status: "paused",
    });
  });

  it("accepts whitelist entries that are addresses of a served chain kind or hostnames", async () => {
    const id = await newWallet();
    const whitelist = [
      "0x000000000000000000000000000000000000dEaD",
      "0x1111111111111111111111111111111111111111",
      "11111111111111111111111111111112",
      "api.example.com",
    ];
    const response = await server.api.request("PATCH", `/v1/wallets/${id}/policy`, {
      token: apiKey,
      body: { whitelist },
    });
    expect(response.status, response.text).toBe(200);
    expect(response.body.whitelist).toEqual(whitelist);
  });

  it("refuses a whitelist entry that is no address of a served chain kind nor a hostname, naming it", async () => {
    const id = await newWallet();
    for (const [entry, why] of [
      ["0x12", "is not an EVM address (0x followed by 40 hex digits)"],
      [
        "0x000000000000000000000000000000000000DeaD",
        "has mixed case that does not match its EIP-55 checksum; write it as checksummed or all lowercase",
      ],
      ["9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrp", "is not an EVM address, a Solana address or a hostname"],
      ["https://api.example.com/pay", "is not an EVM address, a Solana address or a hostname"],
    ]) {
      const response = await server.api.request("PATCH", `/v1/wallets/${id}/policy`, {
        token: apiKey,
        body: { whitelist: ["api.example.com", entry] },
      });
      expect(response.status, entry).toBe(400);
      expect(expectErrorShape(response)).toMatchObject({
        code: "ValidationError",
        reason: "invalid_body",
        message: `Invalid body: whitelist.1: ${JSON.stringify(entry)} ${why}`,
      });
    }
    expect((await server.api.get(`/v1/wallets/${id}/policy`, apiKey)).body.whitelist).toEqual([]);
    const created = await server.api.post(
      "/v1/wallets",
      { name: "bad list", chains: ["base"], policy: { whitelist: ["not an address"] } },
      apiKey,
    );
    expect(created.status).toBe(400);
    expect(expectErrorShape(created).message).toBe(
      'Invalid body: policy.whitelist.0: "not an address" is not an EVM address, a Solana address or a hostname',
    );
  });

  it("rejects bad values with 400 and another account's wallet with 404", async () => {
    const id = await newWallet();
    for (const body of [
      { maxPerTx: "-1" },
      { dailyLimit: "1.0000001" },
      { whitelist: "x" },
      { status: "paused" },
      { maxPerTx: "ten" },
    ]) {
      const response = await server.api.request("PATCH", `/v1/wallets/${id}/policy`, { token: apiKey, body });
      expect(response.status, JSON.stringify(body)).toBe(400);
      expect(expectErrorShape(response).code).toBe("ValidationError");
    }
    const other = await seedAccount(server.api, "other");
    for (const [method, path] of [
      ["GET", `/v1/wallets/${id}/policy`],
      ["PATCH", `/v1/wallets/${id}/policy`],
      ["POST", `/v1/wallets/${id}/policy/pause`],
      ["POST", `/v1/wallets/${id}/policy/resume`],
    ] as const) {
      const response = await server.api.request(method, path, {
        token: other.apiKey,
        ...(method === "PATCH" ? { body: {} } : {}),
      });
      expect(response.status, `${method} ${path}`).toBe(404);
    }
    expect((await server.api.get(`/v1/wallets/${id}/policy`, apiKey)).body.status).toBe("active");
  });
});

describe("a token without a USD price (a profile with no SVC_PRICE_ETH_USD)", () => {
  let devnet: Devnet;
  let unpriced: TestServer;
  let key: string;

  beforeAll(async () => {
    // The testnet profile prices nothing but USDC; its base-sepolia is a local anvil with that chain id.
    devnet = await startDevnet({ evmChainId: 84532 });
    unpriced = await createTestServer({
      devnet,
      env: testnetProfileOnLocalChains(devnet),
    });
    ({ apiKey: key } = await seedAccount(unpriced.api));
  });
  afterAll(async () => {
    await unpriced?.close();
    await devnet?.stop();
  });

  async function sendEth(policy: Record<string, unknown>) {
    const created = await unpriced.api.post(
      "/v1/wallets",
      { name: "unpriced", chains: ["base-sepolia"], policy },
      key,
    );
    expect(created.status, created.text).toBe(201);
    await fundEvm(devnet, created.body.evm.address, { eth: 10n ** 19n });
    return unpriced.api.post(
      `/v1/wallets/${created.body.id}/send`,
      { to: "0x000000000000000000000000000000000000dEaD", amount: "1", token: "ETH", chain: "base-sepolia" },
      key,
    );
  }

  it.each([
    ["maxPerTx", { maxPerTx: "10" }],
    ["dailyLimit", { dailyLimit: "10" }],
    ["approvalAbove", { approvalAbove: "100" }],
    ["alertAbove", { alertAbove: "1" }],
  ])(
    "refuses it where %s is set, as it cannot be valued against it: 403 price_unavailable",
    async (_rule, policy) => {
      const response = await sendEth(policy);
      expect(response.status, response.text).toBe(403);
      expect(expectErrorShape(response)).toMatchObject({
        code: "PolicyViolation",
        reason: "price_unavailable",
        details: { rule: "price", token: "ETH", chain: "base-sepolia" },
      });
    },
  );

  it("sends it where no USD bound is set", async () => {
    const response = await sendEth({});
    expect(response.status, response.text).toBe(201);
    expect(response.body).toMatchObject({ token: "ETH", amount: "1", status: "pending" });
  });
});
