/**
 * The funds check under a wallet's spend lock counts its Solana x402 payments not yet settled as it counts
 * its Solana sends not yet landed, both ways: a send counts the payments in flight, a payment counts the sends
 * and the other payments in flight.
 *
 * The resource here keeps every payment it is sent and refuses it (402 again): the payment stays pending,
 * unsettled (whoever holds it can still settle it until its blockhash expires). The service reaches the Solana
 * runtime through an RpcGate, which holds a send's broadcast when a test asks. The confirmer is left idle.
 */
import { createKeyPairSignerFromPrivateKeyBytes } from "@solana/kit";
import { fundSolana, startDevnet } from "@svc/devnet";
import {
  createUsdcAccount,
  type LocalFacilitator,
  SOLANA_DEVNET_NETWORK,
  startLocalFacilitator,
} from "@svc/x402-local";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { solanaKey, testnetProfileOnLocalChains } from "./support/chains.ts";
import { eventually } from "./support/eventually.ts";
import { RpcGate } from "./support/rpc-gate.ts";
import { createTestServer, expectErrorShape, seedAccount, type TestServer } from "./support/test-server.ts";
import { startPaymentKeeper } from "./support/x402.ts";

const USDC = 1_000_000n;
let devnet: Awaited<ReturnType<typeof startDevnet>>;
let facilitator: LocalFacilitator;
let gate: RpcGate;
let keeper: Awaited<ReturnType<typeof startPaymentKeeper>>;
let server: TestServer;
let apiKey: string;
let payTo: string;

/** x402's `exact` requirement of `amount` atomic units of the devnet's USDC on Solana, to {@link payTo}. */
function requirement(amount: bigint): Record<string, unknown> {
  return {
    scheme: "exact",
    network: SOLANA_DEVNET_NETWORK,
    amount: String(amount),
    asset: devnet.solana.usdcMint,
    payTo,
    maxTimeoutSeconds: 600,
    extra: { feePayer: facilitator.solanaFeePayer },
  };
}

beforeAll(async () => {
  devnet = await startDevnet({ evmChainId: 84532 });
  facilitator = await startLocalFacilitator(devnet);
  payTo = (await createKeyPairSignerFromPrivateKeyBytes(crypto.getRandomValues(new Uint8Array(32)))).address;
  await createUsdcAccount(devnet, payTo);
  // GET /<amount>: asks that many atomic units of USDC, and refuses (keeps) any payment it is sent.
  keeper = await startPaymentKeeper(requirement);
  gate = await RpcGate.start(devnet.solana.rpcUrl);
  server = await createTestServer({
    devnet,
    env: {
      ...testnetProfileOnLocalChains(devnet),
      SVC_RPC_SOLANA_DEVNET: gate.url,
      SVC_OUTBOUND_ALLOW: "127.0.0.0/8",
      SVC_X402_FACILITATOR_URL: facilitator.url,
      SVC_CONFIRMER_INTERVAL_MS: "3600000",
    },
  });
  ({ apiKey } = await seedAccount(server.api));
});

afterAll(async () => {
  await server?.close();
  await gate?.close();
  await keeper?.close();
  await facilitator?.stop();
  await devnet?.stop();
});

async function fundedWallet(usdc: bigint): Promise<{ id: string }> {
  const created = await server.api.post("/v1/wallets", { name: "payer", chains: ["solana-devnet"] }, apiKey);
  expect(created.status, created.text).toBe(201);
  await fundSolana(devnet, created.body.solana.address, { sol: 10n ** 8n, usdc });
  return created.body;
}

/** Pays the keeper `amount` (whole USDC) from the wallet. */
function pay(walletId: string, amount: bigint) {
  return server.api.post("/v1/x402/fetch", { walletId, url: `${keeper.url}/${amount * USDC}` }, apiKey);
}

/** A payment the keeper kept: answered with its 402, recorded pending. */
async function keptPayment(walletId: string, amount: bigint): Promise<void> {
  const response = await pay(walletId, amount);
  expect(response.status, response.text).toBe(200);
  expect(response.body).toMatchObject({ status: 402, transaction: { type: "x402", status: "pending" } });
}

/** Sends `amount` USDC from the wallet to a fresh address (whose token account the send opens). */
async function send(walletId: string, amount: string) {
  const to = (await solanaKey()).address;
  return server.api.post(`/v1/wallets/${walletId}/send`, { to, amount, chain: "solana-devnet" }, apiKey);
}

describe("the funds check counts Solana x402 payments and sends in flight", () => {
  it("a send counts a payment not yet settled: 3 USDC from 5 while 4 are promised to a resource is refused", async () => {
    const wallet = await fundedWallet(5n * USDC);
    await keptPayment(wallet.id, 4n);
    const refused = await send(wallet.id, "3");
    // Before, it was admitted against the 5 USDC on chain, and the payment could no longer be settled.
    expect(refused.status, refused.text).toBe(422);
    expect(expectErrorShape(refused)).toMatchObject({
      reason: "insufficient_token",
      message:
        "Insufficient USDC: balance 5, of which 4 is taken by 1 x402 payment not yet on chain; this send needs 3",
    });
    expect((await send(wallet.id, "1")).status).toBe(201);
  });

  it("a payment counts another not yet settled: a second 4 USDC from 5 is refused, nothing signed", async () => {
    const wallet = await fundedWallet(5n * USDC);
    await keptPayment(wallet.id, 4n);
    const refused = await pay(wallet.id, 4n);
    // Before, both were signed and recorded, each checked against the whole balance.
    expect(refused.status, refused.text).toBe(422);
    expect(expectErrorShape(refused)).toMatchObject({
      reason: "insufficient_token",
      message:
        "Insufficient USDC: balance 5, of which 4 is taken by 1 x402 payment not yet on chain; this payment needs 4",
    });
    const payments = await server.api.get(`/v1/wallets/${wallet.id}/transactions?type=x402`, apiKey);
    expect(payments.body.data).toHaveLength(1);
  });

  it("a payment counts a send not yet landed: 4 USDC from 5 while a send of 3 waits to be broadcast is refused", async () => {
    const wallet = await fundedWallet(5n * USDC);
    gate.decide = ({ methods }) => (methods.includes("sendTransaction") ? "hold" : "forward");
    try {
      const sent = send(wallet.id, "3");
      await eventually(() => gate.held.length === 1, { describe: "the send's broadcast" });
      const refused = await pay(wallet.id, 4n);
      // Before, it was signed against the 5 USDC on chain, beside the send that takes 3 of them.
      expect(refused.status, refused.text).toBe(422);
      expect(expectErrorShape(refused)).toMatchObject({
        reason: "insufficient_token",
        message:
          "Insufficient USDC: balance 5, of which 3 is taken by 1 send not yet on chain; this payment needs 4",
      });
      gate.openUp();
      expect((await sent).status).toBe(201);
    } finally {
      gate.openUp();
    }
  });
});
