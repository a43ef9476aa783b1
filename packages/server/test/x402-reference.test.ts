/**
 * Svc's x402 payer against the reference implementation on the local chains: payments built and signed by
 * src/x402 are verified and settled by the reference facilitator (`@x402/core` + `@x402/evm` / `@x402/svm`)
 * and accepted by the reference resource servers (`@x402/express` v2, `x402-express` 1.2 v1); the
 * settlement lands on chain and the balances move by exactly the price.
 *
 * Chains: the devnet's EVM chain is the devnet profile's `base` (chain 31337). `@x402/svm` knows only the
 * public Solana ids, so the devnet's Solana RPC is paid as the testnet profile's `solana-devnet` pointed at
 * it; v1 names EVM chains from a closed list, so its test runs a devnet whose anvil has Base Sepolia's chain
 * id (84532) and pays it as the testnet profile's `base-sepolia` pointed there.
 */
import { randomBytes } from "node:crypto";
import { type Address, createKeyPairSignerFromPrivateKeyBytes } from "@solana/kit";
import { type Devnet, fundEvm, fundSolana, startDevnet } from "@svc/devnet";
import {
  createUsdcAccount,
  type LocalFacilitator,
  type ResourceServer,
  SOLANA_DEVNET_NETWORK,
  startLocalFacilitator,
  startResourceServerV1,
  startResourceServerV2,
} from "@svc/x402-local";
import { createPublicClient, createTestClient, http } from "viem";
import { privateKeyToAddress } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createChainClient, resolveChains } from "../src/chains/registry.ts";
import type { ChainConfig, TokenInfo } from "../src/chains/types.ts";
import { loadConfig } from "../src/internal/config.ts";
import { getPaymentSettlement, getRecentBlockhash } from "../src/x402/chain-reads.ts";
import { parsePaymentChallenge, type SelectedRequirement, selectRequirement } from "../src/x402/challenge.ts";
import { decodeHeaderJson, encodeHeaderJson } from "../src/x402/encoding.ts";
import { OutboundFetcher } from "../src/x402/outbound-fetch.ts";
import { fetchWithPayment, type PaidFetchInput, type PaidFetchResult } from "../src/x402/paid-fetch.ts";
import { type SignedPayment, signPayment } from "../src/x402/payment.ts";
import { testnetProfileOnLocalChains } from "./support/chains.ts";
import { eventually } from "./support/eventually.ts";

const PRICE = 10_000n; // 0.01 USDC
const WEATHER = { city: "Lisbon", forecast: "sunny", celsius: 21 };

/** A wallet's keys as the service holds them: 32 secret bytes per chain kind. */
interface WalletKeys {
  evm: { privateKey: Buffer; address: `0x${string}` };
  solana: { privateKey: Buffer; address: Address };
}

async function newWallet(): Promise<WalletKeys> {
  const evm = randomBytes(32);
  const solana = randomBytes(32);
  return {
    evm: { privateKey: evm, address: privateKeyToAddress(`0x${evm.toString("hex")}`) },
    solana: { privateKey: solana, address: (await createKeyPairSignerFromPrivateKeyBytes(solana)).address },
  };
}

/** A wallet holding USDC only: the facilitator pays gas and fees. */
async function fundedWallet(devnet: Devnet): Promise<WalletKeys> {
  const wallet = await newWallet();
  await fundEvm(devnet, wallet.evm.address, { usdc: 1_000_000n });
  await fundSolana(devnet, wallet.solana.address, { usdc: 1_000_000n });
  return wallet;
}

/** The chain configurations the service would resolve for these profiles, pointed at `devnet`. */
async function chainsOf(devnet: Devnet, evmProfile: "devnet" | "testnet"): Promise<ChainConfig[]> {
  const testnet = await resolveChains(loadConfig(testnetProfileOnLocalChains(devnet)).network);
  const solanaDevnet = testnet.find((c) => c.name === "solana-devnet");
  const evm =
    evmProfile === "testnet"
      ? testnet.find((c) => c.name === "base-sepolia")
      : (
          await resolveChains({
            ...loadConfig({}).network,
            rpcUrls: { base: devnet.evm.rpcUrl, solana: devnet.solana.rpcUrl },
            usdcAddresses: { base: devnet.evm.usdc, solana: devnet.solana.usdcMint },
          })
        ).find((c) => c.name === "base");
  if (!evm || !solanaDevnet) throw new Error("profile chains missing");
  return [evm, solanaDevnet];
}

function usdcOf(chain: ChainConfig): TokenInfo {
  const token = chain.tokens.find((t) => t.symbol === "USDC");
  if (!token) throw new Error(`no USDC on ${chain.name}`);
  return token;
}

async function usdcBalance(chain: ChainConfig, owner: string): Promise<bigint> {
  const client = createChainClient(chain);
  try {
    return await client.getBalance(owner, usdcOf(chain));
  } finally {
    await client.close?.();
  }
}

/** The pipeline's part, reduced to signing: reads what signing needs first, then signs with the wallet's key. */
function signWith(wallet: WalletKeys, calls: SelectedRequirement[] = []): NonNullable<PaidFetchInput["pay"]> {
  return async ({ challenge, selected }) => {
    calls.push(selected);
    const solana = selected.chain.kind === "solana";
    return signPayment({
      challenge,
      selected,
      privateKey: solana ? wallet.solana.privateKey : wallet.evm.privateKey,
      now: new Date(),
      ...(solana ? { recentBlockhash: await getRecentBlockhash(selected.chain) } : {}),
    });
  };
}

function paid(result: PaidFetchResult): Extract<PaidFetchResult, { outcome: "paid" }> {
  if (result.outcome !== "paid") {
    throw new Error(
      `expected a paid fetch, got ${result.outcome}: ${"reason" in result ? result.reason : ""}`,
    );
  }
  return result;
}

describe("v2: the reference resource server and facilitator on the devnet (EVM 31337, Solana)", () => {
  let devnet: Devnet;
  let facilitator: LocalFacilitator;
  let server: ResourceServer;
  let outbound: OutboundFetcher;
  let chains: ChainConfig[];
  let base: ChainConfig;
  let solanaDevnet: ChainConfig;
  const evmPayTo = privateKeyToAddress(`0x${randomBytes(32).toString("hex")}`);
  let solanaPayTo: string;
  /** Released by the test that holds the facilitator's settle answer back. */
  let holdSettleAnswer: Promise<void> | undefined;

  beforeAll(async () => {
    devnet = await startDevnet();
    facilitator = await startLocalFacilitator(devnet, { onSettled: () => holdSettleAnswer });
    solanaPayTo = (await newWallet()).solana.address;
    await createUsdcAccount(devnet, solanaPayTo);
    chains = await chainsOf(devnet, "devnet");
    [base, solanaDevnet] = chains as [ChainConfig, ChainConfig];
    const evmOffer = {
      network: base.network,
      payTo: evmPayTo,
      amount: String(PRICE),
      asset: devnet.evm.usdc,
      extra: devnet.evm.usdcEip712,
    };
    const solanaOffer = {
      network: SOLANA_DEVNET_NETWORK,
      payTo: solanaPayTo,
      amount: String(PRICE),
      asset: devnet.solana.usdcMint,
    };
    server = await startResourceServerV2(
      facilitator.url,
      [
        { path: "/weather/evm", accepts: [evmOffer], body: WEATHER },
        { path: "/weather/solana", accepts: [solanaOffer], body: WEATHER },
        { path: "/weather/either", accepts: [evmOffer, solanaOffer], body: WEATHER },
      ],
      { free: { "/free": { free: true } } },
    );
    // The devnet profile's default: loopback is exempt from the outbound guard.
    outbound = new OutboundFetcher({ allow: loadConfig({}).outboundAllow });
  });

  afterAll(async () => {
    await outbound?.close();
    await server?.stop();
    await facilitator?.stop();
    await devnet?.stop();
  });

  it("pays on EVM: 200 with the resource, the receipt names a settled transaction, balances move by the price", async () => {
    const wallet = await fundedWallet(devnet);
    const before = {
      payer: await usdcBalance(base, wallet.evm.address),
      payee: await usdcBalance(base, evmPayTo),
    };
    const settledBefore = facilitator.settlements.length;

    const result = paid(
      await fetchWithPayment(outbound, {
        request: { url: `${server.url}/weather/evm` },
        constraints: { chains },
        pay: signWith(wallet),
      }),
    );

    expect(result.challenge.version).toBe(2);
    expect(result.payment.header.name).toBe("PAYMENT-SIGNATURE");
    expect(result.response.status).toBe(200);
    expect(JSON.parse(result.response.body.toString())).toEqual(WEATHER);
    expect(result.receipt).toMatchObject({
      header: "PAYMENT-RESPONSE",
      success: true,
      network: "eip155:31337",
      payer: wallet.evm.address,
    });
    const txHash = result.receipt?.transaction as `0x${string}`;
    const receipt = await createPublicClient({ transport: http(devnet.evm.rpcUrl) }).getTransactionReceipt({
      hash: txHash,
    });
    expect(receipt.status).toBe("success");
    expect(receipt.from.toLowerCase()).toBe(facilitator.evmAddress.toLowerCase());
    expect(await usdcBalance(base, wallet.evm.address)).toBe(before.payer - PRICE);
    expect(await usdcBalance(base, evmPayTo)).toBe(before.payee + PRICE);
    expect(facilitator.settlements.slice(settledBefore)).toEqual([
      expect.objectContaining({ transaction: txHash }),
    ]);
    // The chain tells the same, from the receipt's hash and without it.
    expect(await getPaymentSettlement(base, result.payment.onChain, txHash)).toEqual({
      state: "settled",
      txHash,
    });
    expect(await getPaymentSettlement(base, result.payment.onChain)).toEqual({ state: "settled", txHash });
  });

  it("pays on Solana: the facilitator is the fee payer, the wallet holds no SOL, balances move by the price", async () => {
    const wallet = await fundedWallet(devnet);
    const before = {
      payer: await usdcBalance(solanaDevnet, wallet.solana.address),
      payee: await usdcBalance(solanaDevnet, solanaPayTo),
    };

    const result = paid(
      await fetchWithPayment(outbound, {
        request: { url: `${server.url}/weather/solana` },
        constraints: { chains },
        pay: signWith(wallet),
      }),
    );

    expect(result.selected.chain.name).toBe("solana-devnet");
    expect(result.selected.requirement.extra.feePayer).toBe(facilitator.solanaFeePayer);
    expect(result.response.status).toBe(200);
    expect(JSON.parse(result.response.body.toString())).toEqual(WEATHER);
    expect(result.receipt).toMatchObject({ success: true, network: SOLANA_DEVNET_NETWORK });
    const signature = result.receipt?.transaction ?? "";
    expect(await getPaymentSettlement(solanaDevnet, result.payment.onChain, signature)).toEqual({
      state: "settled",
      txHash: signature,
    });
    expect(await getPaymentSettlement(solanaDevnet, result.payment.onChain)).toEqual({
      state: "settled",
      txHash: signature,
    });
    expect(await usdcBalance(solanaDevnet, wallet.solana.address)).toBe(before.payer - PRICE);
    expect(await usdcBalance(solanaDevnet, solanaPayTo)).toBe(before.payee + PRICE);
    const sol = { symbol: "SOL", address: null, decimals: 9 };
    expect(await createChainClient(solanaDevnet).getBalance(wallet.solana.address, sol)).toBe(0n);
  });

  it("is verified and settled by the reference facilitator directly, on EVM and on Solana", async () => {
    const wallet = await fundedWallet(devnet);
    const supported = (await (await fetch(`${facilitator.url}/supported`)).json()) as {
      kinds: { network: string; extra?: Record<string, unknown> }[];
    };
    const feePayer = supported.kinds.find((k) => k.network === SOLANA_DEVNET_NETWORK)?.extra?.feePayer;
    // Requirements as a resource server would state them.
    const requirements = [
      {
        scheme: "exact",
        network: base.network,
        amount: "12345",
        asset: devnet.evm.usdc,
        payTo: evmPayTo,
        maxTimeoutSeconds: 60,
        extra: devnet.evm.usdcEip712,
      },
      {
        scheme: "exact",
        network: SOLANA_DEVNET_NETWORK,
        amount: "12345",
        asset: devnet.solana.usdcMint,
        payTo: solanaPayTo,
        maxTimeoutSeconds: 60,
        extra: { feePayer },
      },
    ];
    for (const [index, requirement] of requirements.entries()) {
      const challenge = parsePaymentChallenge({
        headers: new Headers({
          "payment-required": encodeHeaderJson({
            x402Version: 2,
            resource: { url: "http://x/" },
            accepts: [requirement],
          }),
        }),
        body: "{}",
      });
      const selected = selectRequirement(challenge, { chains });
      const payment = await signWith(wallet)({ challenge, selected, url: "http://x/" });
      const chain = chains[index] as ChainConfig;
      const payee = index === 0 ? evmPayTo : solanaPayTo;
      const before = await usdcBalance(chain, payee);
      const body = JSON.stringify({
        x402Version: 2,
        paymentPayload: decodeHeaderJson(payment.header.value),
        paymentRequirements: requirement,
      });
      const post = async (path: string) =>
        (await fetch(`${facilitator.url}${path}`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body,
        }).then((r) => r.json())) as Record<string, unknown>;

      expect(await post("/verify")).toMatchObject({ isValid: true, payer: payment.payer });
      const settled = await post("/settle");
      expect(settled).toMatchObject({ success: true, network: requirement.network, payer: payment.payer });
      expect(await usdcBalance(chain, payee)).toBe(before + 12345n);
      expect(await getPaymentSettlement(chain, payment.onChain)).toEqual({
        state: "settled",
        txHash: settled.transaction,
      });
    }
  });

  it("pays the requirement of the caller's chain, or the server's first one the wallet holds", async () => {
    const wallet = await fundedWallet(devnet);
    const url = `${server.url}/weather/either`;
    const first = paid(
      await fetchWithPayment(outbound, { request: { url }, constraints: { chains }, pay: signWith(wallet) }),
    );
    expect(first.selected.chain.name).toBe("base");
    const chosen = paid(
      await fetchWithPayment(outbound, {
        request: { url },
        constraints: { chains, chain: "solana-devnet" },
        pay: signWith(wallet),
      }),
    );
    expect(chosen.selected.chain.name).toBe("solana-devnet");
    expect(chosen.receipt).toMatchObject({ success: true, network: SOLANA_DEVNET_NETWORK });
    const onlySolana = paid(
      await fetchWithPayment(outbound, {
        request: { url },
        constraints: { chains: [solanaDevnet] },
        pay: signWith(wallet),
      }),
    );
    expect(onlySolana.selected.chain.name).toBe("solana-devnet");
  });

  it("signs nothing for a price over maxAmount, and nothing moves", async () => {
    const wallet = await fundedWallet(devnet);
    const calls: SelectedRequirement[] = [];
    const before = await usdcBalance(base, wallet.evm.address);
    const error = await fetchWithPayment(outbound, {
      request: { url: `${server.url}/weather/either` },
      constraints: { chains, maxAmount: "0.009999" },
      pay: signWith(wallet, calls),
    }).catch((e: unknown) => e);
    expect(error).toMatchObject({ status: 400, reason: "max_amount_exceeded" });
    expect(calls).toEqual([]);
    expect(await usdcBalance(base, wallet.evm.address)).toBe(before);
  });

  it("returns a resource that asks no payment untouched, without paying", async () => {
    const calls: SelectedRequirement[] = [];
    const result = await fetchWithPayment(outbound, {
      request: { url: `${server.url}/free` },
      constraints: { chains },
      pay: signWith(await newWallet(), calls),
    });
    expect(result.outcome).toBe("unpaid");
    expect(JSON.parse((result as { response: { body: Buffer } }).response.body.toString())).toEqual({
      free: true,
    });
    expect(calls).toEqual([]);
  });

  it.each(["evm", "solana"] as const)(
    "reports a payment the facilitator refuses (%s: a wallet without USDC) as rejected, with the reason, and it never settles",
    async (kind) => {
      const wallet = await newWallet();
      const result = await fetchWithPayment(outbound, {
        request: { url: `${server.url}/weather/${kind}` },
        constraints: { chains },
        pay: signWith(wallet),
      });
      expect(result.outcome).toBe("rejected");
      const rejected = result as Extract<PaidFetchResult, { outcome: "rejected" }>;
      expect(rejected.response.status).toBe(402);
      expect(rejected.reason).toBe(
        kind === "evm"
          ? "invalid_exact_evm_insufficient_balance"
          : "invalid_exact_svm_transaction_simulation_failed",
      );
      expect(await getPaymentSettlement(rejected.selected.chain, rejected.payment.onChain)).toEqual({
        state: "pending",
      });
    },
  );

  it("when the settle answer never comes back, reports the outcome unknown and the chain says settled, paid once", async () => {
    const wallet = await fundedWallet(devnet);
    const payee = await usdcBalance(base, evmPayTo);
    const settledBefore = facilitator.settlements.length;
    let release = () => {};
    holdSettleAnswer = new Promise<void>((resolve) => {
      release = resolve;
    });
    const calls: SelectedRequirement[] = [];
    const impatient = new OutboundFetcher({ allow: ["127.0.0.0/8"], timeoutMs: 8_000 });
    try {
      const result = await fetchWithPayment(impatient, {
        request: { url: `${server.url}/weather/evm` },
        constraints: { chains },
        pay: signWith(wallet, calls),
      });
      expect(result.outcome).toBe("unknown");
      expect((result as { error: unknown }).error).toMatchObject({ reason: "resource_timeout" });
      const payment = (result as { payment: SignedPayment }).payment;
      const settlement = await eventually(async () => {
        const status = await getPaymentSettlement(base, payment.onChain);
        return status.state === "settled" ? status : undefined;
      });
      expect(settlement.txHash).toMatch(/^0x[0-9a-f]{64}$/);
      expect(calls).toHaveLength(1);
      expect(facilitator.settlements.slice(settledBefore)).toEqual([
        expect.objectContaining({ success: true, transaction: settlement.txHash }),
      ]);
      expect(await usdcBalance(base, evmPayTo)).toBe(payee + PRICE);
    } finally {
      holdSettleAnswer = undefined;
      release();
      await impatient.close();
    }
  });

  // Last in this block: it moves the chains' clocks forward.
  it("tells a signed payment that was never sent as pending, then expired once it can no longer settle", async () => {
    const wallet = await fundedWallet(devnet);
    for (const chain of [base, solanaDevnet]) {
      const probe = await outbound.fetch({
        url: `${server.url}/weather/${chain.kind === "evm" ? "evm" : "solana"}`,
        headers: { accept: "application/json" },
      });
      const challenge = parsePaymentChallenge(probe);
      const selected = selectRequirement(challenge, { chains });
      const payment = await signWith(wallet)({ challenge, selected, url: probe.url });
      expect(await getPaymentSettlement(chain, payment.onChain)).toEqual({ state: "pending" });
      if (chain.kind === "evm") {
        const anvil = createTestClient({ mode: "anvil", transport: http(devnet.evm.rpcUrl) });
        await anvil.increaseTime({ seconds: 3 * 3600 });
        await anvil.mine({ blocks: 1 });
      } else {
        devnet.advanceSolanaSlots(200);
      }
      expect(await getPaymentSettlement(chain, payment.onChain)).toEqual({ state: "expired" });
    }
  });
});

describe("v1: x402-express 1.2 and the facilitator on a devnet with Base Sepolia's chain id (84532)", () => {
  let devnet: Devnet;
  let facilitator: LocalFacilitator;
  let server: ResourceServer;
  let outbound: OutboundFetcher;
  let chains: ChainConfig[];
  const evmPayTo = privateKeyToAddress(`0x${randomBytes(32).toString("hex")}`);
  let solanaPayTo: string;

  beforeAll(async () => {
    devnet = await startDevnet({ evmChainId: 84532 });
    facilitator = await startLocalFacilitator(devnet);
    solanaPayTo = (await newWallet()).solana.address;
    await createUsdcAccount(devnet, solanaPayTo);
    chains = await chainsOf(devnet, "testnet");
    server = await startResourceServerV1(facilitator.url, [
      {
        path: "/weather/evm",
        network: "base-sepolia",
        payTo: evmPayTo,
        amount: String(PRICE),
        // The local token's domain ("USD Coin") differs from the profile's Base Sepolia USDC ("USDC"): the
        // payment must sign under the challenge's extra, not the profile's.
        asset: { address: devnet.evm.usdc, decimals: 6, eip712: devnet.evm.usdcEip712 },
        body: WEATHER,
      },
      {
        path: "/weather/solana",
        network: "solana-devnet",
        payTo: solanaPayTo,
        amount: String(PRICE),
        asset: { address: devnet.solana.usdcMint, decimals: 6 },
        body: WEATHER,
      },
    ]);
    outbound = new OutboundFetcher({ allow: ["127.0.0.0/8"] });
  });

  afterAll(async () => {
    await outbound?.close();
    await server?.stop();
    await facilitator?.stop();
    await devnet?.stop();
  });

  it("pays on EVM (base-sepolia) with X-PAYMENT; the receipt comes in X-PAYMENT-RESPONSE", async () => {
    const [baseSepolia] = chains as [ChainConfig];
    expect(baseSepolia).toMatchObject({ name: "base-sepolia", network: "eip155:84532" });
    expect(usdcOf(baseSepolia).eip712).toEqual({ name: "USDC", version: "2" });
    const wallet = await fundedWallet(devnet);
    const before = {
      payer: await usdcBalance(baseSepolia, wallet.evm.address),
      payee: await usdcBalance(baseSepolia, evmPayTo),
    };

    const result = paid(
      await fetchWithPayment(outbound, {
        request: { url: `${server.url}/weather/evm` },
        constraints: { chains },
        pay: signWith(wallet),
      }),
    );

    expect(result.challenge.version).toBe(1);
    expect(result.payment.header.name).toBe("X-PAYMENT");
    expect(result.selected.requirement.extra).toEqual(devnet.evm.usdcEip712);
    expect(JSON.parse(result.response.body.toString())).toEqual(WEATHER);
    expect(result.receipt).toMatchObject({
      header: "X-PAYMENT-RESPONSE",
      success: true,
      network: "base-sepolia",
    });
    const txHash = result.receipt?.transaction ?? "";
    expect(await getPaymentSettlement(baseSepolia, result.payment.onChain, txHash)).toEqual({
      state: "settled",
      txHash,
    });
    expect(await usdcBalance(baseSepolia, wallet.evm.address)).toBe(before.payer - PRICE);
    expect(await usdcBalance(baseSepolia, evmPayTo)).toBe(before.payee + PRICE);
  });

  it("pays on Solana (solana-devnet) with X-PAYMENT", async () => {
    const solanaDevnet = chains[1] as ChainConfig;
    const wallet = await fundedWallet(devnet);
    const before = await usdcBalance(solanaDevnet, solanaPayTo);

    const result = paid(
      await fetchWithPayment(outbound, {
        request: { url: `${server.url}/weather/solana` },
        constraints: { chains },
        pay: signWith(wallet),
      }),
    );

    expect(result.payment.header.name).toBe("X-PAYMENT");
    expect(result.receipt).toMatchObject({ success: true, network: "solana-devnet" });
    expect(
      await getPaymentSettlement(solanaDevnet, result.payment.onChain, result.receipt?.transaction),
    ).toEqual({
      state: "settled",
      txHash: result.receipt?.transaction,
    });
    expect(await usdcBalance(solanaDevnet, solanaPayTo)).toBe(before + PRICE);
  });
});
