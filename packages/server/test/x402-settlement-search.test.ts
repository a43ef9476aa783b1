/**
 * How far back the search for an unsettled Solana x402 payment reads the payer's token account history. A
 * payment pending on chain is searched for on every confirmer pass, so reading transactions older than the
 * payment costs one `getTransaction` each, every pass, for nothing.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { fundSolana } from "@svc/devnet";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import type { ChainConfig } from "../src/chains/types.ts";
import { getPaymentSettlement, getRecentBlockhash } from "../src/x402/chain-reads.ts";
import { parsePaymentChallenge, selectRequirement } from "../src/x402/challenge.ts";
import { encodeHeaderJson } from "../src/x402/encoding.ts";
import { signPayment } from "../src/x402/payment.ts";
import { solanaKey, testnetProfileOnLocalChains } from "./support/chains.ts";
import { type RpcProxy, startRpcProxy } from "./support/rpc-proxy.ts";
import { createTestServer, seedAccount, sharedDevnet } from "./support/test-server.ts";

const NETWORK = "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1";
let devnet: Awaited<ReturnType<typeof sharedDevnet>>;
let proxy: RpcProxy;
let chain: ChainConfig;

beforeAll(async () => {
  devnet = await sharedDevnet();
  proxy = await startRpcProxy(devnet.solana.rpcUrl, () => "forward");
  chain = {
    name: "solana-devnet",
    kind: "solana",
    network: NETWORK,
    testnet: true,
    rpcUrl: proxy.url,
    nativeToken: { symbol: "SOL", address: null, decimals: 9 },
    tokens: [{ symbol: "USDC", address: devnet.solana.usdcMint, decimals: 6 }],
  };
});
afterAll(() => proxy?.close());

/** An x402 v2 challenge for 0.01 USDC on the devnet's Solana runtime, the fee paid by a made-up facilitator. */
async function solanaChallenge(): Promise<string> {
  return encodeHeaderJson({
    x402Version: 2,
    resource: { url: "http://127.0.0.1/quiet" },
    accepts: [
      {
        scheme: "exact",
        network: NETWORK,
        amount: "10000",
        asset: devnet.solana.usdcMint,
        payTo: (await solanaKey()).address,
        maxTimeoutSeconds: 60,
        extra: { feePayer: (await solanaKey()).address },
      },
    ],
  });
}

describe("the search for a Solana x402 payment no receipt settled", () => {
  it("reads no transaction of the payer's token account older than the payment's blockhash", async () => {
    const payer = await solanaKey();
    // The payer's token account gets its first transaction: the one that creates and funds it.
    await fundSolana(devnet, payer.address, { usdc: 1_000_000n });
    const challenge = parsePaymentChallenge({
      headers: new Headers({ "payment-required": await solanaChallenge() }),
      body: "{}",
    });
    const signed = await signPayment({
      challenge,
      selected: selectRequirement(challenge, { chains: [chain] }),
      privateKey: payer.privateKey,
      now: new Date(),
      recentBlockhash: await getRecentBlockhash(chain),
    });

    // Signed and never sent: not on chain, and still able to land.
    const reads = proxy.count("getTransaction");
    expect(await getPaymentSettlement(chain, signed.onChain)).toEqual({ state: "pending" });
    // The funding transaction is older than the blockhash, so it cannot be the payment: not read.
    expect(proxy.count("getTransaction") - reads).toBe(0);
  });

  it("made by the confirmer for a recorded payment, reads none either", async () => {
    const challenge = await solanaChallenge();
    // Takes the payment and answers without a receipt, settling nothing: the payment stays pending.
    const quiet: Server = createServer((req, res) => {
      if (typeof req.headers["payment-signature"] !== "string") {
        res.writeHead(402, { "payment-required": challenge, "content-type": "application/json" }).end("{}");
        return;
      }
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
    await new Promise<void>((resolve) => quiet.listen(0, "127.0.0.1", resolve));
    const server = await createTestServer({
      env: {
        ...testnetProfileOnLocalChains(devnet),
        SVC_RPC_SOLANA_DEVNET: proxy.url,
        SVC_OUTBOUND_ALLOW: "127.0.0.0/8",
        SVC_CONFIRMER_INTERVAL_MS: "3600000",
      },
    });
    onTestFinished(async () => {
      await server.close();
      await new Promise((resolve) => quiet.close(resolve));
    });
    const { apiKey } = await seedAccount(server.api);
    const wallet = await server.api.post("/v1/wallets", { name: "payer", chains: ["solana-devnet"] }, apiKey);
    // Two transactions in the wallet's token account history before the payment.
    await fundSolana(devnet, wallet.body.solana.address, { usdc: 500_000n });
    await fundSolana(devnet, wallet.body.solana.address, { usdc: 500_000n });
    const url = `http://127.0.0.1:${(quiet.address() as AddressInfo).port}/quiet`;
    const paid = await server.api.post("/v1/x402/fetch", { walletId: wallet.body.id, url }, apiKey);
    expect(paid.status, paid.text).toBe(200);
    expect(paid.body.transaction).toMatchObject({ type: "x402", status: "pending" });

    const reads = proxy.count("getTransaction");
    await server.service.confirmer.runOnce();
    expect(proxy.count("getTransaction") - reads).toBe(0);
    const recorded = await server.api.get(`/v1/transactions/${paid.body.transactionId}`, apiKey);
    expect(recorded.body.status).toBe("pending");
  });
});
