/**
 * How far back the search for an unsettled Solana x402 payment reads the payer's token account history. A
 * payment pending on chain is searched for on every confirmer pass, so reading transactions older than the
 * payment costs one `getTransaction` each, every pass, for nothing; reading too few would miss a settled
 * payment and end it expired, its amount released while the payee was paid. The search starts 32 slots
 * before the payment's blockhash, and ends a payment expired only on what a node that had seen the chain's
 * height told it (behind a load balancer, another node may be behind). On EVM, the same holds of the
 * authorization's state, read at the block whose date decides.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import {
  createKeyPairSignerFromPrivateKeyBytes,
  createSolanaRpc,
  getBase64EncodedWireTransaction,
  getBase64Encoder,
  getTransactionDecoder,
  partiallySignTransaction,
} from "@solana/kit";
import { fundEvm, fundSolana, startDevnet } from "@svc/devnet";
import { startLocalFacilitator } from "@svc/x402-local";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import type { ChainConfig } from "../src/chains/types.ts";
import { getPaymentSettlement, getRecentBlockhash } from "../src/x402/chain-reads.ts";
import { parsePaymentChallenge, selectRequirement } from "../src/x402/challenge.ts";
import { encodeHeaderJson } from "../src/x402/encoding.ts";
import { type SignedPayment, signPayment } from "../src/x402/payment.ts";
import { evmKey, solanaKey, testnetProfileOnLocalChains } from "./support/chains.ts";
import { eventually } from "./support/eventually.ts";
import { type RpcProxy, startRpcProxy } from "./support/rpc-proxy.ts";
import { createTestServer, seedAccount, sharedDevnet } from "./support/test-server.ts";
import { settleAtFacilitator } from "./support/x402.ts";

const NETWORK = "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1";
/** More slots than the search's margin before the payment's blockhash. */
const PAST_THE_MARGIN = 40;
let devnet: Awaited<ReturnType<typeof sharedDevnet>>;
let proxy: RpcProxy;
let chain: ChainConfig;

beforeAll(async () => {
  devnet = await sharedDevnet();
  proxy = await startRpcProxy(devnet.solana.rpcUrl, () => "forward");
  chain = solanaDevnet(proxy.url, devnet.solana.usdcMint);
});
afterAll(() => proxy?.close());

/** The devnet's Solana runtime as a chain of the testnet profile, reached at `rpcUrl`. */
function solanaDevnet(rpcUrl: string, usdcMint: string): ChainConfig {
  return {
    name: "solana-devnet",
    kind: "solana",
    network: NETWORK,
    testnet: true,
    rpcUrl,
    nativeToken: { symbol: "SOL", address: null, decimals: 9 },
    tokens: [{ symbol: "USDC", address: usdcMint, decimals: 6 }],
  };
}

/** An x402 v2 challenge for 0.01 USDC of `usdcMint` to `payTo`, its fee paid by `feePayer`. */
async function solanaChallenge(
  usdcMint: string,
  parties: { payTo?: string; feePayer?: string } = {},
): Promise<string> {
  return encodeHeaderJson({
    x402Version: 2,
    resource: { url: "http://127.0.0.1/quiet" },
    accepts: [
      {
        scheme: "exact",
        network: NETWORK,
        amount: "10000",
        asset: usdcMint,
        payTo: parties.payTo ?? (await solanaKey()).address,
        maxTimeoutSeconds: 60,
        extra: { feePayer: parties.feePayer ?? (await solanaKey()).address },
      },
    ],
  });
}

/** The payment of `challenge` by `payer`, signed with a blockhash read now from `on`. */
async function signedPayment(on: ChainConfig, payer: Uint8Array, challenge: string): Promise<SignedPayment> {
  const parsed = parsePaymentChallenge({
    headers: new Headers({ "payment-required": challenge }),
    body: "{}",
  });
  return signPayment({
    challenge: parsed,
    selected: selectRequirement(parsed, { chains: [on] }),
    privateKey: payer,
    now: new Date(),
    recentBlockhash: await getRecentBlockhash(on),
  });
}

/** The facilitator's part: signs the payment's transaction as its fee payer and submits it. */
async function submitAsFacilitator(rpcUrl: string, signed: SignedPayment, feePayerSeed: Uint8Array) {
  const wire = JSON.parse(Buffer.from(signed.header.value, "base64").toString("utf8")).payload.transaction;
  const transaction = getTransactionDecoder().decode(getBase64Encoder().encode(wire));
  const feePayer = await createKeyPairSignerFromPrivateKeyBytes(feePayerSeed);
  const submitted = await partiallySignTransaction([feePayer.keyPair], transaction);
  return createSolanaRpc(rpcUrl)
    .sendTransaction(getBase64EncodedWireTransaction(submitted), { encoding: "base64", skipPreflight: true })
    .send();
}

/**
 * A payment settled on the shared devnet near the end of its blockhash's life, and the chain moved past its
 * last valid height since: only a search that finds it can tell it from an expired one.
 */
async function settledLate() {
  const [payer, payTo, feePayer] = [await solanaKey(), await solanaKey(), await solanaKey()];
  await Promise.all([
    fundSolana(devnet, payer.address, { usdc: 1_000_000n }),
    fundSolana(devnet, payTo.address, { usdc: 1n }),
    fundSolana(devnet, feePayer.address, { sol: 10n ** 9n }),
  ]);
  const on = solanaDevnet(devnet.solana.rpcUrl, devnet.solana.usdcMint);
  const signed = await signedPayment(
    on,
    payer.privateKey,
    await solanaChallenge(devnet.solana.usdcMint, { payTo: payTo.address, feePayer: feePayer.address }),
  );
  // Submitted late in its blockhash's life (150 slots), and found past it while still recent.
  devnet.advanceSolanaSlots(90);
  const txHash = await submitAsFacilitator(devnet.solana.rpcUrl, signed, feePayer.privateKey);
  await eventually(async () => (await getPaymentSettlement(on, signed.onChain)).state === "settled");
  devnet.advanceSolanaSlots(70);
  return { on, signed, txHash };
}

/**
 * A FAKE of what the machine cannot reach: behind one URL, a node still at slot 1 answers `method` as such a
 * node does: `answer` for a read that asks no `minContextSlot` past its own, -32016 for one that does.
 */
async function nodeBehind(method: string, answer: unknown) {
  const behind = await startRpcProxy(devnet.solana.rpcUrl, (called, _nth, body) => {
    if (called !== method) return "forward";
    const request = JSON.parse(body) as { id: number; params?: [unknown, { minContextSlot?: number }?] };
    const minContextSlot = request.params?.[1]?.minContextSlot;
    const reply =
      minContextSlot !== undefined && minContextSlot > 1
        ? {
            error: {
              code: -32016,
              message: "Minimum context slot has not been reached",
              data: { contextSlot: 1 },
            },
          }
        : { result: answer };
    return { status: 200, body: JSON.stringify({ jsonrpc: "2.0", id: request.id, ...reply }) };
  });
  onTestFinished(() => behind.close());
  return solanaDevnet(behind.url, devnet.solana.usdcMint);
}

describe("the search for a Solana x402 payment no receipt settled", () => {
  it("reads no transaction of the payer's token account from before the payment's blockhash", async () => {
    const payer = await solanaKey();
    // The payer's token account gets its first transaction: the one that creates and funds it.
    await fundSolana(devnet, payer.address, { usdc: 1_000_000n });
    devnet.advanceSolanaSlots(PAST_THE_MARGIN);
    const signed = await signedPayment(
      chain,
      payer.privateKey,
      await solanaChallenge(devnet.solana.usdcMint),
    );

    // Signed and never sent: not on chain, and still able to land.
    const reads = proxy.count("getTransaction");
    expect(await getPaymentSettlement(chain, signed.onChain)).toEqual({ state: "pending" });
    // The funding transaction is older than the blockhash, so it cannot be the payment: not read.
    expect(proxy.count("getTransaction") - reads).toBe(0);
  });

  it("finds a payment that landed in the very slot its blockhash was read at", async () => {
    // A local chain that stays in its first slot, which counts as confirmed while it is still made.
    const frozen = await startDevnet({ solanaSlotMs: 3_600_000 });
    onTestFinished(() => frozen.stop());
    const on = solanaDevnet(frozen.solana.rpcUrl, frozen.solana.usdcMint);
    const [payer, payTo, feePayerSeed] = [await solanaKey(), await solanaKey(), await solanaKey()];
    // Not waited for: confirming them takes a slot that never comes. They land at once all the same.
    void fundSolana(frozen, payer.address, { usdc: 1_000_000n }).catch(() => {});
    void fundSolana(frozen, payTo.address, { usdc: 1n }).catch(() => {});
    void fundSolana(frozen, feePayerSeed.address, { sol: 10n ** 9n }).catch(() => {});
    const rpc = createSolanaRpc(frozen.solana.rpcUrl);
    await eventually(async () => {
      const { value } = await rpc.getBalance(feePayerSeed.address, { commitment: "processed" }).send();
      return value > 0n;
    });
    await eventually(async () => {
      const { value } = await rpc
        .getTokenAccountsByOwner(payTo.address, { mint: frozen.solana.usdcMint }, { encoding: "base64" })
        .send();
      return value.length > 0;
    });
    const signed = await signedPayment(
      on,
      payer.privateKey,
      await solanaChallenge(frozen.solana.usdcMint, { payTo: payTo.address, feePayer: feePayerSeed.address }),
    );
    expect(signed.onChain).toMatchObject({ blockhashSlot: 1n });

    const txHash = await submitAsFacilitator(frozen.solana.rpcUrl, signed, feePayerSeed.privateKey);

    // Found in slot 1, the blockhash's own; and still once the chain has moved past its last valid height.
    expect(await getPaymentSettlement(on, signed.onChain)).toEqual({ state: "settled", txHash });
    frozen.advanceSolanaSlots(200);
    expect(await getPaymentSettlement(on, signed.onChain)).toEqual({ state: "settled", txHash });
  });

  it("does not end a settled payment expired on a history told by a node behind: it asks one that has seen the height it read", async () => {
    const { on, signed, txHash } = await settledLate();
    // The node behind lists nothing for the payer's token account (it was expired: its amount released).
    const balanced = await nodeBehind("getSignaturesForAddress", []);
    await expect(getPaymentSettlement(balanced, signed.onChain)).rejects.toMatchObject({ status: 502 });
    expect(await getPaymentSettlement(on, signed.onChain)).toEqual({ state: "settled", txHash });
  });

  it("does not end a settled payment expired when a node cannot return a transaction the history lists", async () => {
    const { on, signed, txHash } = await settledLate();
    const balanced = await nodeBehind("getTransaction", null);
    expect(await getPaymentSettlement(balanced, signed.onChain)).toEqual({ state: "pending" });
    expect(await getPaymentSettlement(on, signed.onChain)).toEqual({ state: "settled", txHash });
  });

  it("ends a payment expired all the same when a transaction a node never returns is older than any node behind could be", async () => {
    const payer = await solanaKey();
    await fundSolana(devnet, payer.address, { usdc: 1_000_000n });
    const signed = await signedPayment(
      chain,
      payer.privateKey,
      await solanaChallenge(devnet.solana.usdcMint),
    );
    // A transaction of the payer's token account after the blockhash, which the node never returns.
    await fundSolana(devnet, payer.address, { usdc: 1n });
    devnet.advanceSolanaSlots(200);
    const pruned = await nodeBehind("getTransaction", null);
    // It was pending for good, the payment's amount held in the daily limit.
    expect(await getPaymentSettlement(pruned, signed.onChain)).toEqual({ state: "expired" });
  });

  it("made by the confirmer for a recorded payment, reads none either", async () => {
    const challenge = await solanaChallenge(devnet.solana.usdcMint);
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
        // Nor does the watcher of incoming transfers read the wallet's transactions meanwhile.
        SVC_WATCH_INTERVAL_MS: "3600000",
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
    devnet.advanceSolanaSlots(PAST_THE_MARGIN);
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

/** An EVM x402 payment signed by a funded payer and settled by the local facilitator, its receipt unread. */
async function settledEvmPayment() {
  const facilitator = await startLocalFacilitator(devnet);
  onTestFinished(() => facilitator.stop());
  const network = `eip155:${devnet.evm.chainId}`;
  const base: ChainConfig = {
    name: "base",
    kind: "evm",
    network,
    testnet: true,
    rpcUrl: devnet.evm.rpcUrl,
    nativeToken: { symbol: "ETH", address: null, decimals: 18 },
    tokens: [{ symbol: "USDC", address: devnet.evm.usdc, decimals: 6 }],
  };
  const payer = evmKey();
  await fundEvm(devnet, payer.address, { usdc: 1_000_000n });
  const requirement = {
    scheme: "exact",
    network,
    amount: "10000",
    asset: devnet.evm.usdc,
    payTo: evmKey().address,
    maxTimeoutSeconds: 60,
    extra: devnet.evm.usdcEip712,
  };
  const challenge = parsePaymentChallenge({
    headers: new Headers({
      "payment-required": encodeHeaderJson({ x402Version: 2, accepts: [requirement] }),
    }),
    body: "{}",
  });
  const signed = await signPayment({
    challenge,
    selected: selectRequirement(challenge, { chains: [base] }),
    privateKey: payer.privateKey,
    now: new Date(),
  });
  const settled = await settleAtFacilitator(facilitator.url, signed.header.value, requirement);
  expect(settled, JSON.stringify(settled)).toMatchObject({ success: true });
  return { base, signed, txHash: settled.transaction };
}

describe("the settlement read of an EVM x402 payment no receipt settled", () => {
  // First: the test after it moves the chain's clock an hour past the facilitator's.
  it("settles a payment the chain says used even when the endpoint refuses the search for its transaction", async () => {
    const { base, signed, txHash } = await settledEvmPayment();
    // A FAKE of a hosted endpoint's limit: it refuses eth_getLogs over the search's block range.
    const capped = await startRpcProxy(devnet.evm.rpcUrl, (method, _nth, body) => {
      if (method !== "eth_getLogs") return "forward";
      const { id } = JSON.parse(body) as { id: number };
      const error = { code: -32600, message: "eth_getLogs is limited to a 1000 block range" };
      return { status: 200, body: JSON.stringify({ jsonrpc: "2.0", id, error }) };
    });
    onTestFinished(() => capped.close());
    // It stayed pending for good, the payee paid and its amount held.
    expect(await getPaymentSettlement({ ...base, rpcUrl: capped.url }, signed.onChain)).toEqual({
      state: "settled",
      txHash: "",
    });
    // Where the search is answered, the transaction is named.
    expect(await getPaymentSettlement(base, signed.onChain)).toEqual({ state: "settled", txHash });
  });

  it("does not end a settled payment expired on the word of a node behind: the authorization is read at the block whose date decides", async () => {
    const { base, signed } = await settledEvmPayment();
    // An hour later: the chain's newest block is dated past the authorization's validBefore.
    for (const [method, params] of [
      ["evm_increaseTime", [3600]],
      ["evm_mine", []],
    ] as const) {
      await fetch(devnet.evm.rpcUrl, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
      });
    }

    // A FAKE of what the machine cannot reach: contract reads answered by a node still before the payment's
    // block, which says the authorization unused at its own latest block, and has no newer one to read at.
    const behind = await startRpcProxy(devnet.evm.rpcUrl, (method, _nth, body) => {
      if (method !== "eth_call") return "forward";
      const { id, params } = JSON.parse(body) as { id: number; params: [unknown, unknown] };
      const reply =
        params[1] === "latest"
          ? { result: `0x${"0".repeat(64)}` }
          : { error: { code: -32000, message: "header not found" } };
      return { status: 200, body: JSON.stringify({ jsonrpc: "2.0", id, ...reply }) };
    });
    onTestFinished(() => behind.close());
    // It was ended expired, its amount given back to the daily limit while the payee had been paid.
    await expect(getPaymentSettlement({ ...base, rpcUrl: behind.url }, signed.onChain)).rejects.toMatchObject(
      {
        status: 502,
      },
    );
    expect(await getPaymentSettlement(base, signed.onChain)).toMatchObject({ state: "settled" });
  });
});
