import { fundEvm, fundSolana } from "@svc/devnet";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "./support/eventually.ts";
import { RpcGate } from "./support/rpc-gate.ts";
import {
  createTestServer,
  evmThroughGate,
  expectErrorShape,
  seedAccount,
  sharedDevnet,
  type TestServer,
} from "./support/test-server.ts";

let server: TestServer;
let apiKey: string;
beforeAll(async () => {
  server = await createTestServer();
  ({ apiKey } = await seedAccount(server.api));
});
afterAll(() => server.close());

async function createWallet(chains = ["base", "solana"]) {
  const response = await server.api.post("/v1/wallets", { name: "faucet test", chains }, apiKey);
  expect(response.status).toBe(201);
  return response.body as { id: string; evm?: { address: string }; solana?: { address: string } };
}

async function receives(walletId: string, chain: string) {
  const response = await server.api.get(
    `/v1/wallets/${walletId}/transactions?type=receive&chain=${chain}`,
    apiKey,
  );
  expect(response.status).toBe(200);
  return response.body as { data: Record<string, string>[]; total: number };
}

/**
 * Returns once the watcher has scanned past everything on `chain` so far: a marker wallet funded now from
 * outside is recorded only by a scan that covers every earlier block or slot.
 */
async function watcherPassed(chain: "base" | "solana"): Promise<void> {
  const devnet = await sharedDevnet();
  const marker = await createWallet([chain]);
  if (chain === "base") await fundEvm(devnet, marker.evm?.address as `0x${string}`, { eth: 1n });
  else await fundSolana(devnet, marker.solana?.address as never, { sol: 1_000_000n });
  await eventually(async () => ((await receives(marker.id, chain)).total > 0 ? true : undefined));
}

describe("faucet and balance", () => {
  it("starts a new wallet at zero on every chain and token, with exact USD values", async () => {
    const wallet = await createWallet();
    const response = await server.api.get(`/v1/wallets/${wallet.id}/balance`, apiKey);
    expect(response.status).toBe(200);
    expect(response.body).toEqual({
      walletId: wallet.id,
      balances: [
        { chain: "base", token: "ETH", amount: "0", usdValue: "0.00" },
        { chain: "base", token: "USDC", amount: "0", usdValue: "0.00" },
        { chain: "solana", token: "SOL", amount: "0", usdValue: "0.00" },
        { chain: "solana", token: "USDC", amount: "0", usdValue: "0.00" },
      ],
      totalUsdValue: "0.00",
      updatedAt: expect.any(String),
    });
  });

  for (const chain of ["base", "solana"] as const) {
    const native = chain === "base" ? "ETH" : "SOL";
    it(`pays USDC and ${native} on ${chain}: the balance moves by exactly the amount, one receive row each`, async () => {
      const wallet = await createWallet();
      const address = chain === "base" ? wallet.evm?.address : wallet.solana?.address;
      const usdc = await server.api.post(
        `/v1/wallets/${wallet.id}/faucet`,
        { chain, token: "USDC", amount: "25.5" },
        apiKey,
      );
      expect(usdc.status).toBe(201);
      expect(usdc.body).toMatchObject({
        walletId: wallet.id,
        type: "receive",
        amount: "25.5",
        token: "USDC",
        chain,
        to: address,
        status: "confirmed",
        txHash: expect.any(String),
      });
      expect(usdc.body.id).toMatch(/^tx_/);
      const coin = await server.api.post(
        `/v1/wallets/${wallet.id}/faucet`,
        { chain, token: native, amount: 0.25 },
        apiKey,
      );
      expect(coin.status).toBe(201);
      expect(coin.body).toMatchObject({
        type: "receive",
        amount: "0.25",
        token: native,
        status: "confirmed",
      });

      const balance = await server.api.get(`/v1/wallets/${wallet.id}/balance`, apiKey);
      const price = chain === "base" ? "750.00" : "37.50"; // 0.25 × 3000 or × 150
      expect(balance.body.balances.filter((b: { chain: string }) => b.chain === chain)).toEqual([
        { chain, token: native, amount: "0.25", usdValue: price },
        { chain, token: "USDC", amount: "25.5", usdValue: "25.50" },
      ]);
      expect(balance.body.totalUsdValue).toBe(chain === "base" ? "775.50" : "63.00");

      // The watcher sees the same payments on chain; they stay one row each.
      await watcherPassed(chain);
      const history = await receives(wallet.id, chain);
      expect(history.total).toBe(2);
      expect(history.data.map((t) => t.id).sort()).toEqual([usdc.body.id, coin.body.id].sort());
      expect((await server.api.get(`/v1/transactions/${usdc.body.id}`, apiKey)).body).toEqual(usdc.body);
    });
  }

  it("pays the default amount when none is given", async () => {
    const wallet = await createWallet(["solana"]);
    const response = await server.api.post(
      `/v1/wallets/${wallet.id}/faucet`,
      { chain: "solana", token: "usdc" },
      apiKey,
    );
    expect(response.status).toBe(201);
    expect(response.body).toMatchObject({ amount: "100", token: "USDC" });
  });

  it("caps each wallet per chain and token over 24 h, admitting exactly the cap under concurrent requests", async () => {
    const wallet = await createWallet(["base"]);
    const results = await Promise.all(
      Array.from({ length: 5 }, () =>
        server.api.post(
          `/v1/wallets/${wallet.id}/faucet`,
          { chain: "base", token: "USDC", amount: "300" },
          apiKey,
        ),
      ),
    );
    const statuses = results.map((r) => r.status).sort();
    expect(statuses).toEqual([201, 201, 201, 400, 400]);
    const refused = results.find((r) => r.status === 400);
    expect(refused && expectErrorShape(refused)).toMatchObject({
      code: "ValidationError",
      reason: "faucet_cap_exceeded",
      message: "Faucet cap of 1000 USDC per wallet per 24h on base exceeded: 900 used, this request is 300",
      details: { chain: "base", token: "USDC", cap: "1000", used: "900", requested: "300", remaining: "100" },
    });
    expect(new Date(refused?.body.error.details.resetsAt).getTime()).toBeGreaterThan(Date.now());
    const balance = await server.api.get(`/v1/wallets/${wallet.id}/balance`, apiKey);
    expect(balance.body.balances).toContainEqual({
      chain: "base",
      token: "USDC",
      amount: "900",
      usdValue: "900.00",
    });
    // The native coin has its own cap: 10 ETH.
    const eth = await server.api.post(
      `/v1/wallets/${wallet.id}/faucet`,
      { chain: "base", token: "ETH", amount: "10" },
      apiKey,
    );
    expect(eth.status).toBe(201);
    const over = await server.api.post(
      `/v1/wallets/${wallet.id}/faucet`,
      { chain: "base", token: "ETH", amount: "0.000001" },
      apiKey,
    );
    expect(expectErrorShape(over)).toMatchObject({
      reason: "faucet_cap_exceeded",
      details: { cap: "10", used: "10" },
    });
    // What was refused moved nothing and recorded nothing.
    expect((await receives(wallet.id, "base")).total).toBe(4);
  });

  it("refuses bad faucet requests with the error contract", async () => {
    const wallet = await createWallet(["base"]);
    const other = await seedAccount(server.api);
    const cases: [unknown, number, string][] = [
      [{ chain: "solana", token: "USDC" }, 400, "chain_not_in_wallet"],
      [{ chain: "dogecoin", token: "USDC" }, 400, "unknown_chain"],
      [{ chain: "base", token: "DOGE" }, 400, "unknown_token"],
      [{ chain: "base", token: "USDC", amount: "0" }, 400, "invalid_amount"],
      [{ chain: "base", token: "USDC", amount: "1.0000001" }, 400, "invalid_amount"],
      [{ chain: "base", token: "USDC", amount: "-1" }, 400, "invalid_amount"],
      [{ chain: "base" }, 400, "invalid_body"],
    ];
    for (const [body, status, reason] of cases) {
      const response = await server.api.post(`/v1/wallets/${wallet.id}/faucet`, body, apiKey);
      expect(response.status, JSON.stringify(body)).toBe(status);
      expect(expectErrorShape(response).reason, JSON.stringify(body)).toBe(reason);
    }
    const foreign = await server.api.post(
      `/v1/wallets/${wallet.id}/faucet`,
      { chain: "base", token: "USDC" },
      other.apiKey,
    );
    expect(foreign.status).toBe(404);
    expect((await server.api.get(`/v1/wallets/${wallet.id}/balance`, other.apiKey)).status).toBe(404);
    expect((await receives(wallet.id, "base")).total).toBe(0);
  });

  it("refuses SOL too little for a new account (its rent exemption) with 400, and pays nothing", async () => {
    const wallet = await createWallet(["solana"]);
    const dust = await server.api.post(
      `/v1/wallets/${wallet.id}/faucet`,
      { chain: "solana", token: "SOL", amount: "0.000000001" },
      apiKey,
    );
    expect(dust.status, dust.text).toBe(400);
    expect(expectErrorShape(dust)).toMatchObject({
      code: "ValidationError",
      reason: "below_rent_minimum",
      details: { chain: "solana", account: "recipient", token: "SOL", resulting: "0.000000001" },
    });
    // Nothing was paid: the one receive is the payment after it.
    const paid = await server.api.post(
      `/v1/wallets/${wallet.id}/faucet`,
      { chain: "solana", token: "SOL" },
      apiKey,
    );
    expect(paid.status, paid.text).toBe(201);
    expect((await receives(wallet.id, "solana")).total).toBe(1);
  });
});

describe("the faucet behind a load balancer whose nodes take turns, one of them behind", () => {
  it("answers the confirmed payment with its receive, though the node asked next does not show it yet", async () => {
    const gate = await RpcGate.start((await sharedDevnet()).evm.rpcUrl);
    // Every other receipt lookup reaches a node that has not seen the transaction yet.
    let receiptLookups = 0;
    let behindAnswers = 0;
    gate.decide = ({ methods, body }) => {
      if (methods.length !== 1 || methods[0] !== "eth_getTransactionReceipt" || ++receiptLookups % 2 === 1)
        return "forward";
      behindAnswers++;
      const { id } = JSON.parse(body) as { id: number };
      return { gatewayAnswers: { status: 200, body: JSON.stringify({ jsonrpc: "2.0", id, result: null }) } };
    };
    const faucetKey = generatePrivateKey();
    await fundEvm(await sharedDevnet(), privateKeyToAccount(faucetKey).address, {
      eth: 10n ** 18n,
      usdc: 100_000_000n,
    });
    const balanced = await createTestServer({
      env: { ...(await evmThroughGate(gate)), SVC_FAUCET_EVM_PRIVATE_KEY: faucetKey },
    });
    try {
      const owner = await seedAccount(balanced.api);
      const wallet = await balanced.api.post(
        "/v1/wallets",
        { name: "balanced", chains: ["base"] },
        owner.apiKey,
      );
      const paid = await balanced.api.post(
        `/v1/wallets/${wallet.body.id}/faucet`,
        { chain: "base", token: "USDC", amount: "3" },
        owner.apiKey,
      );
      expect(paid.status, paid.text).toBe(201);
      expect(paid.body).toMatchObject({ type: "receive", amount: "3", status: "confirmed" });
      expect(behindAnswers).toBeGreaterThan(0);
      const listed = await balanced.api.get(
        `/v1/wallets/${wallet.body.id}/transactions?type=receive`,
        owner.apiKey,
      );
      expect(listed.body.data.map((t: { id: string }) => t.id)).toEqual([paid.body.id]);
    } finally {
      await balanced.close();
      await gate.close();
    }
  });
});
