import { fundSolana } from "@svc/devnet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mainnetProfileOnLocalChains } from "./support/chains.ts";
import {
  createTestServer,
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

describe("GET /v1/chains", () => {
  it("lists base and solana of the embedded devnet, with local network ids and the tokens' facts", async () => {
    const devnet = await sharedDevnet();
    const response = await server.api.get("/v1/chains", apiKey);
    expect(response.status).toBe(200);
    expect(response.body).toEqual([
      {
        name: "base",
        kind: "evm",
        network: "eip155:31337",
        nativeToken: { symbol: "ETH", decimals: 18, usdPrice: "3000" },
        tokens: [
          {
            symbol: "USDC",
            address: devnet.evm.usdc,
            decimals: 6,
            usdPrice: "1",
            eip712: { name: "USD Coin", version: "2" },
          },
        ],
        testnet: true,
      },
      {
        name: "solana",
        kind: "solana",
        network: expect.stringMatching(/^solana:[1-9A-HJ-NP-Za-km-z]{32}$/),
        nativeToken: { symbol: "SOL", decimals: 9, usdPrice: "150" },
        tokens: [{ symbol: "USDC", address: devnet.solana.usdcMint, decimals: 6, usdPrice: "1" }],
        testnet: true,
      },
    ]);
    expect(response.body[1].network).not.toBe("solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp");
    // RPC URLs are deployment configuration, never shown.
    expect(response.text).not.toContain(devnet.evm.rpcUrl);
    expect(response.text).not.toContain(devnet.solana.rpcUrl);
  });

  it("requires a credential", async () => {
    expect((await server.api.get("/v1/chains")).status).toBe(401);
  });

  it("refuses a wallet asking for a chain outside the profile with 400 unknown_chain", async () => {
    const response = await server.api.post(
      "/v1/wallets",
      { name: "w", chains: ["base", "ethereum"] },
      apiKey,
    );
    expect(response.status).toBe(400);
    expect(expectErrorShape(response)).toMatchObject({
      code: "ValidationError",
      reason: "unknown_chain",
      message: 'Unknown chain "ethereum"; this deployment serves base, solana',
      details: { chain: "ethereum", served: ["base", "solana"] },
    });
  });
});

describe("another profile", () => {
  it("serves the mainnet chains, accepts wallets on them, values SOL at null without a price, and offers no faucet there", async () => {
    const devnet = await sharedDevnet();
    // The mainnet profile's names and tokens; its RPC URLs point at the local chains, which only the
    // watcher touches here (the faucet refuses before any chain call).
    const mainnet = await createTestServer({
      env: mainnetProfileOnLocalChains(devnet),
    });
    try {
      const key = (await seedAccount(mainnet.api)).apiKey;
      const chains = await mainnet.api.get("/v1/chains", key);
      expect(
        chains.body.map((c: { name: string; network: string; testnet: boolean }) => [
          c.name,
          c.network,
          c.testnet,
        ]),
      ).toEqual([
        ["base", "eip155:8453", false],
        ["ethereum", "eip155:1", false],
        ["arbitrum", "eip155:42161", false],
        ["solana", "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp", false],
      ]);
      expect(chains.body[0].nativeToken).toEqual({ symbol: "ETH", decimals: 18 });
      const wallet = await mainnet.api.post(
        "/v1/wallets",
        { name: "m", chains: ["arbitrum", "solana"] },
        key,
      );
      expect(wallet.status).toBe(201);
      const faucet = await mainnet.api.post(
        `/v1/wallets/${wallet.body.id}/faucet`,
        { chain: "arbitrum", token: "USDC" },
        key,
      );
      expect(faucet.status).toBe(404);
      expect(expectErrorShape(faucet)).toMatchObject({
        code: "NotFound",
        reason: "faucet_unavailable",
        message: "No faucet on arbitrum: it is not a local or test network",
      });
      // No SOL price is configured on this profile: its value is null and left out of the total.
      const solana = await mainnet.api.post("/v1/wallets", { name: "s", chains: ["solana"] }, key);
      await fundSolana(devnet, solana.body.solana.address, { sol: 1_000_000_000n });
      const balance = await mainnet.api.get(`/v1/wallets/${solana.body.id}/balance`, key);
      expect(balance.body.balances).toEqual([
        { chain: "solana", token: "SOL", amount: "1", usdValue: null },
        { chain: "solana", token: "USDC", amount: "0", usdValue: "0.00" },
      ]);
      expect(balance.body.totalUsdValue).toBe("0.00");
      const devnetName = await mainnet.api.post("/v1/wallets", { name: "x", chains: ["base-sepolia"] }, key);
      expect(expectErrorShape(devnetName)).toMatchObject({ reason: "unknown_chain" });
    } finally {
      await mainnet.close();
    }
  });
});

describe("a devnet run elsewhere", () => {
  it("is served from RPC URLs and token addresses in the environment, its faucet paying from a configured key", async () => {
    const devnet = await sharedDevnet();
    const external = await createTestServer({
      env: {
        SVC_RPC_BASE: devnet.evm.rpcUrl,
        SVC_RPC_SOLANA: devnet.solana.rpcUrl,
        SVC_USDC_BASE: devnet.evm.usdc,
        SVC_USDC_SOLANA: devnet.solana.usdcMint,
        SVC_FAUCET_SOLANA_SECRET_KEY: JSON.stringify([...devnet.treasury.solana.secretKey]),
      },
    });
    try {
      const key = (await seedAccount(external.api)).apiKey;
      const chains = await external.api.get("/v1/chains", key);
      expect(chains.body.map((c: { name: string; network: string }) => [c.name, c.network])).toEqual([
        ["base", "eip155:31337"],
        ["solana", (await server.api.get("/v1/chains", apiKey)).body[1].network],
      ]);
      const wallet = await external.api.post("/v1/wallets", { name: "e", chains: ["base", "solana"] }, key);
      const paid = await external.api.post(
        `/v1/wallets/${wallet.body.id}/faucet`,
        { chain: "solana", token: "USDC", amount: "3" },
        key,
      );
      expect(paid.status).toBe(201);
      expect(paid.body).toMatchObject({ type: "receive", amount: "3", from: devnet.treasury.solana.address });
      // No EVM faucet key configured: no faucet on base.
      const evm = await external.api.post(
        `/v1/wallets/${wallet.body.id}/faucet`,
        { chain: "base", token: "USDC" },
        key,
      );
      expect(expectErrorShape(evm)).toMatchObject({
        reason: "faucet_unavailable",
        message: "No faucet on base: no faucet account is configured",
      });
    } finally {
      await external.close();
    }
  });
});
