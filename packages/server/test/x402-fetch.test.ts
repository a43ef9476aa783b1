/**
 * POST /v1/x402/fetch over real sockets, against the x402 reference implementation on the local chains: the
 * reference facilitator (`@x402/core` + `@x402/evm` / `@x402/svm`) settling on the devnet, and resource
 * servers built from `@x402/express` (v2) and `x402-express` 1.2 (v1).
 *
 * Chains: v1 names EVM chains from a closed list and `@x402/svm` knows only the public Solana ids, so the
 * service runs its testnet profile pointed at a devnet whose anvil has Base Sepolia's chain id (84532):
 * `base-sepolia` is the devnet's EVM chain and `solana-devnet` its Solana runtime.
 */

import { randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { type Address, createKeyPairSignerFromPrivateKeyBytes } from "@solana/kit";
import { startTestDaemon, type TestDaemon } from "@svc/authzd/testing";
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
import { eq } from "drizzle-orm";
import { createPublicClient, createTestClient, http } from "viem";
import { privateKeyToAddress } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { createChainClient, resolveChains } from "../src/chains/registry.ts";
import type { ChainConfig } from "../src/chains/types.ts";
import { MAX_FETCHES_PER_ACCOUNT } from "../src/http/routes/x402/fetch.ts";
import { idempotencyKeys } from "../src/internal/db/schema.ts";
import { admitSpend } from "../src/spends/admission.ts";
import { testnetProfileOnLocalChains } from "./support/chains.ts";
import { eventually } from "./support/eventually.ts";
import { RpcGate } from "./support/rpc-gate.ts";
import { waitForSettled } from "./support/spends.ts";
import { createTestServer, expectErrorShape, seedAccount, type TestServer } from "./support/test-server.ts";
import { settleAtFacilitator } from "./support/x402.ts";

const PRICE = 10_000n; // 0.01 USDC
const USDC = 1_000_000n;
const WEATHER = { city: "Lisbon", forecast: "sunny", celsius: 21 };
const FETCH_TIMEOUT_MS = 8000;
/** The timeout of the server that only waits a silent resource out: nothing has to answer within it. */
const SILENT_RESOURCE_TIMEOUT_MS = 2000;

let devnet: Devnet;
let daemon: TestDaemon;
let agentToken: string;
let facilitator: LocalFacilitator;
let v2: ResourceServer;
let v1: ResourceServer;
let redirector: Server;
let redirectorUrl: string;
let server: TestServer;
let owner: Awaited<ReturnType<typeof seedAccount>>;
let chains: { evm: ChainConfig; solana: ChainConfig };
const evmPayTo = privateKeyToAddress(`0x${randomBytes(32).toString("hex")}`);
let solanaPayTo: string;
/** By payer: the answer the facilitator holds back once it has settled that payer's payment. */
const heldSettleAnswers = new Map<string, Promise<void>>();
let plainServer: Promise<TestServer> | undefined;

/**
 * A service on the testnet profile and nothing more: no facilitator, and loopback not exempted from the
 * outbound rules (`SVC_OUTBOUND_ALLOW` unset). Started by the first test that needs it, shared by the others.
 */
function plainService(): Promise<TestServer> {
  plainServer ??= createTestServer({ devnet, env: testnetProfileOnLocalChains(devnet) });
  return plainServer;
}

beforeAll(async () => {
  devnet = await startDevnet({ evmChainId: 84532 });
  facilitator = await startLocalFacilitator(devnet, {
    onSettled: ({ payer }) => (payer === undefined ? undefined : heldSettleAnswers.get(payer)),
  });
  solanaPayTo = (await createKeyPairSignerFromPrivateKeyBytes(randomBytes(32))).address;
  await createUsdcAccount(devnet, solanaPayTo);
  const evmOffer = {
    network: "eip155:84532",
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
  v2 = await startResourceServerV2(
    facilitator.url,
    [
      { path: "/weather/evm", accepts: [evmOffer], body: WEATHER },
      { path: "/weather/solana", accepts: [solanaOffer], body: WEATHER },
    ],
    { free: { "/free": { free: true } } },
  );
  v1 = await startResourceServerV1(facilitator.url, [
    {
      path: "/weather/evm",
      network: "base-sepolia",
      payTo: evmPayTo,
      amount: String(PRICE),
      asset: { address: devnet.evm.usdc, decimals: 6, eip712: devnet.evm.usdcEip712 },
      body: WEATHER,
    },
  ]);
  // Redirects to the cloud metadata endpoint, from an address the service is allowed to reach.
  redirector = createServer((_req, res) => {
    res.writeHead(302, { location: "http://169.254.169.254/latest/meta-data/" }).end();
  });
  await new Promise<void>((resolve) => redirector.listen(0, "127.0.0.1", resolve));
  redirectorUrl = `http://127.0.0.1:${(redirector.address() as AddressInfo).port}`;

  daemon = await startTestDaemon();
  const serviceToken = await daemon.identity("svc-service", ["wallet.spend.verify"]);
  agentToken = await daemon.identity("agent-1", ["wallet.spend.authorize", "wallet.spend.settle"]);
  server = await createTestServer({
    devnet,
    env: {
      ...testnetProfileOnLocalChains(devnet),
      SVC_OUTBOUND_ALLOW: "127.0.0.0/8",
      SVC_AUTHZD_URL: daemon.url,
      SVC_AUTHZD_TOKEN: serviceToken,
      SVC_X402_FACILITATOR_URL: facilitator.url,
      // Shorter than the default 20 s, for the tests that wait a facilitator out; long enough for every
      // paid fetch of the file on a loaded machine.
      SVC_X402_FETCH_TIMEOUT_MS: String(FETCH_TIMEOUT_MS),
    },
  });
  owner = await seedAccount(server.api);
  const resolved = await resolveChains(server.config.network);
  chains = {
    evm: resolved.find((c) => c.name === "base-sepolia") as ChainConfig,
    solana: resolved.find((c) => c.name === "solana-devnet") as ChainConfig,
  };
});

afterAll(async () => {
  await server?.close();
  await (await plainServer)?.close();
  await daemon?.stop();
  await new Promise((resolve) => redirector?.close(resolve));
  await v1?.stop();
  await v2?.stop();
  await facilitator?.stop();
  await devnet?.stop();
});

/** x402's `exact` requirement of a payment of {@link PRICE} in the devnet's USDC to evmPayTo on base-sepolia. */
function evmRequirement() {
  return {
    scheme: "exact",
    network: "eip155:84532",
    amount: String(PRICE),
    asset: devnet.evm.usdc,
    payTo: evmPayTo,
    maxTimeoutSeconds: 60,
    extra: devnet.evm.usdcEip712,
  };
}

interface Wallet {
  id: string;
  evm: { address: string };
  solana: { address: string };
}

/** A wallet of the owner on both chains, holding `usdc` atomic units on each (and no gas: x402 needs none). */
async function fundedWallet(policy?: Record<string, unknown>, usdc = 1n * USDC): Promise<Wallet> {
  const created = await server.api.post(
    "/v1/wallets",
    { name: "payer", chains: ["base-sepolia", "solana-devnet"], ...(policy ? { policy } : {}) },
    owner.apiKey,
  );
  if (created.status !== 201) throw new Error(created.text);
  const wallet = created.body as Wallet;
  if (usdc > 0n) {
    await fundEvm(devnet, wallet.evm.address as `0x${string}`, { usdc });
    await fundSolana(devnet, wallet.solana.address as Address, { usdc });
  }
  return wallet;
}

async function usdcBalance(chain: ChainConfig, address: string): Promise<bigint> {
  const client = createChainClient(chain);
  try {
    return await client.getBalance(address, chain.tokens[0] as ChainConfig["tokens"][number]);
  } finally {
    await client.close?.();
  }
}

function paidFetch(body: Record<string, unknown>, token = owner.apiKey, headers?: Record<string, string>) {
  return server.api.post("/v1/x402/fetch", body, token, headers);
}

async function history(walletId: string, api = server.api, token = owner.apiKey) {
  const response = await api.get(`/v1/wallets/${walletId}/transactions?type=x402&limit=100`, token);
  expect(response.status, response.text).toBe(200);
  return response.body.data as Record<string, unknown>[];
}

describe("paying through POST /v1/x402/fetch", () => {
  it("pays a v2 resource on EVM: 200 with the resource, settled on chain, history shows the confirmed x402 payment", async () => {
    const wallet = await fundedWallet();
    const before = {
      payer: await usdcBalance(chains.evm, wallet.evm.address),
      payee: await usdcBalance(chains.evm, evmPayTo),
    };
    const url = `${v2.url}/weather/evm`;

    const response = await paidFetch({ walletId: wallet.id, url });

    expect(response.status, response.text).toBe(200);
    expect(response.body).toMatchObject({
      status: 200,
      body: WEATHER,
      amountCharged: "0.01",
      paymentReceipt: { success: true, network: "eip155:84532", payer: wallet.evm.address },
    });
    expect(response.body.headers["content-type"]).toMatch(/^application\/json/);
    const txHash = response.body.paymentReceipt.txHash as `0x${string}`;
    const onChain = await createPublicClient({ transport: http(devnet.evm.rpcUrl) }).getTransactionReceipt({
      hash: txHash,
    });
    expect(onChain.status).toBe("success");
    expect(response.body.transaction).toMatchObject({
      id: response.body.transactionId,
      type: "x402",
      status: "confirmed",
      txHash,
      resource: url,
      amount: "0.01",
      token: "USDC",
      chain: "base-sepolia",
      to: evmPayTo,
      from: wallet.evm.address,
    });
    expect(await history(wallet.id)).toEqual([
      expect.objectContaining({
        id: response.body.transactionId,
        type: "x402",
        status: "confirmed",
        txHash,
        resource: url,
      }),
    ]);
    expect(await usdcBalance(chains.evm, wallet.evm.address)).toBe(before.payer - PRICE);
    expect(await usdcBalance(chains.evm, evmPayTo)).toBe(before.payee + PRICE);
  });

  it("pays a v2 resource on Solana: the facilitator pays the fee, the wallet holds no SOL", async () => {
    const wallet = await fundedWallet();
    const before = {
      payer: await usdcBalance(chains.solana, wallet.solana.address),
      payee: await usdcBalance(chains.solana, solanaPayTo),
    };
    const url = `${v2.url}/weather/solana`;

    const response = await paidFetch({ walletId: wallet.id, url });

    expect(response.status, response.text).toBe(200);
    expect(response.body).toMatchObject({
      status: 200,
      body: WEATHER,
      paymentReceipt: { success: true, network: SOLANA_DEVNET_NETWORK, payer: wallet.solana.address },
    });
    const signature = response.body.paymentReceipt.txHash as string;
    expect(signature).toMatch(/^[1-9A-HJ-NP-Za-km-z]{64,88}$/);
    expect(response.body.transaction).toMatchObject({
      type: "x402",
      status: "confirmed",
      txHash: signature,
      resource: url,
      chain: "solana-devnet",
      to: solanaPayTo,
    });
    expect(await history(wallet.id)).toEqual([
      expect.objectContaining({ type: "x402", status: "confirmed", txHash: signature }),
    ]);
    expect(await usdcBalance(chains.solana, wallet.solana.address)).toBe(before.payer - PRICE);
    expect(await usdcBalance(chains.solana, solanaPayTo)).toBe(before.payee + PRICE);
    const sol = chains.solana.nativeToken;
    expect(await createChainClient(chains.solana).getBalance(wallet.solana.address, sol)).toBe(0n);
  });

  it("pays a v1 resource (x402-express 1.2) on base-sepolia, chain 84532, with X-PAYMENT", async () => {
    const wallet = await fundedWallet();
    const payee = await usdcBalance(chains.evm, evmPayTo);

    const response = await paidFetch({ walletId: wallet.id, url: `${v1.url}/weather/evm` });

    expect(response.status, response.text).toBe(200);
    expect(response.body).toMatchObject({
      status: 200,
      body: WEATHER,
      paymentReceipt: { success: true, network: "base-sepolia" },
      transaction: { type: "x402", status: "confirmed", chain: "base-sepolia" },
    });
    expect(response.body.transaction.txHash).toBe(response.body.paymentReceipt.txHash);
    expect(await usdcBalance(chains.evm, evmPayTo)).toBe(payee + PRICE);
  });

  it("returns a resource that asks no payment untouched, and records nothing", async () => {
    const wallet = await fundedWallet(undefined, 0n);
    const response = await paidFetch({ walletId: wallet.id, url: `${v2.url}/free` });
    expect(response.status, response.text).toBe(200);
    expect(response.body).toMatchObject({ status: 200, body: { free: true } });
    expect(response.body.transactionId).toBeUndefined();
    expect(response.body.paymentReceipt).toBeUndefined();
    expect(await history(wallet.id)).toEqual([]);
  });

  it("a probe answers the resource's 402 unpaid, challenge and all, and records and moves nothing", async () => {
    const wallet = await fundedWallet();
    const before = await usdcBalance(chains.evm, wallet.evm.address);
    const url = `${v2.url}/weather/evm`;
    const response = await paidFetch({ walletId: wallet.id, url, probe: true });
    expect(response.status, response.text).toBe(200);
    expect(response.body.status).toBe(402);
    expect(response.body.headers["payment-required"]).toEqual(expect.any(String));
    expect(response.body.transactionId).toBeUndefined();
    expect(response.body.amountCharged).toBeUndefined();
    expect(await history(wallet.id)).toEqual([]);
    expect(await usdcBalance(chains.evm, wallet.evm.address)).toBe(before);

    const withDecision = await paidFetch({
      walletId: wallet.id,
      url,
      probe: true,
      spendAuthorization: { decisionId: "dec_x" },
    });
    expect(withDecision.status).toBe(400);
    expect(expectErrorShape(withDecision).details?.issues).toEqual([
      expect.objectContaining({ path: "spendAuthorization" }),
    ]);
  });

  it("gives up on a resource that does not answer within SVC_X402_FETCH_TIMEOUT_MS: 502 resource_timeout, nothing recorded", async () => {
    // A server of its own with a short timeout, which the test waits out in full.
    const impatient = await createTestServer({
      devnet,
      env: {
        ...testnetProfileOnLocalChains(devnet),
        SVC_OUTBOUND_ALLOW: "127.0.0.0/8",
        SVC_X402_FETCH_TIMEOUT_MS: String(SILENT_RESOURCE_TIMEOUT_MS),
      },
    });
    onTestFinished(() => impatient.close());
    const { apiKey } = await seedAccount(impatient.api);
    const created = await impatient.api.post(
      "/v1/wallets",
      { name: "payer", chains: ["base-sepolia", "solana-devnet"] },
      apiKey,
    );
    expect(created.status, created.text).toBe(201);
    const silent = createServer(() => {});
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    try {
      const url = `http://127.0.0.1:${(silent.address() as AddressInfo).port}/silent`;
      const response = await impatient.api.post("/v1/x402/fetch", { walletId: created.body.id, url }, apiKey);
      expect(response.status, response.text).toBe(502);
      expect(expectErrorShape(response)).toMatchObject({
        reason: "resource_timeout",
        details: { timeoutMs: SILENT_RESOURCE_TIMEOUT_MS },
      });
      expect(await history(created.body.id, impatient.api, apiKey)).toEqual([]);
    } finally {
      silent.closeAllConnections();
      await new Promise((resolve) => silent.close(resolve));
    }
  });

  it("passes the resource's status, and text and binary bodies, through", async () => {
    const wallet = await fundedWallet(undefined, 0n);
    const plain = createServer((req, res) => {
      if (req.url === "/bytes")
        res.writeHead(200, { "content-type": "application/octet-stream" }).end(Buffer.from([0, 1, 254, 255]));
      else res.writeHead(404, { "content-type": "text/plain" }).end("no such thing");
    });
    await new Promise<void>((resolve) => plain.listen(0, "127.0.0.1", resolve));
    const base = `http://127.0.0.1:${(plain.address() as AddressInfo).port}`;
    try {
      const missing = await paidFetch({ walletId: wallet.id, url: `${base}/nothing` });
      expect(missing.status, missing.text).toBe(200);
      expect(missing.body).toMatchObject({ status: 404, body: "no such thing" });
      expect(missing.body.bodyEncoding).toBeUndefined();
      const bytes = await paidFetch({ walletId: wallet.id, url: `${base}/bytes` });
      expect(bytes.body).toMatchObject({ status: 200, body: "AAH+/w==", bodyEncoding: "base64" });
    } finally {
      await new Promise((resolve) => plain.close(resolve));
    }
  });
});

describe("the policy decides before anything is signed", () => {
  /** Asserts a refusal moved and recorded nothing: same balances, no settlement, no history, not served. */
  async function expectNothingPaid(wallet: Wallet, run: () => Promise<void>) {
    const before = await usdcBalance(chains.evm, wallet.evm.address);
    const settled = facilitator.settlements.length;
    const served = v2.served.get("/weather/evm") ?? 0;
    await run();
    expect(await usdcBalance(chains.evm, wallet.evm.address)).toBe(before);
    expect(facilitator.settlements.length).toBe(settled);
    expect(v2.served.get("/weather/evm") ?? 0).toBe(served);
    expect(await history(wallet.id)).toEqual([]);
  }

  it.each([
    ["max_per_tx", { maxPerTx: "0.005" }],
    // A payment cannot wait for an owner's approval (the challenge expires): above approvalAbove it is refused.
    ["approval_required", { approvalAbove: "0.005" }],
    ["policy_paused", { status: "paused" }],
    [
      "recipient_not_allowed",
      { whitelist: ["0x1111111111111111111111111111111111111111", "api.example.com"] },
    ],
  ])("%s: 403 PolicyViolation, nothing signed or recorded", async (reason, policy) => {
    const { status, ...rest } = policy as Record<string, unknown>;
    const wallet = await fundedWallet(rest);
    if (status === "paused") {
      const paused = await server.api.post(`/v1/wallets/${wallet.id}/policy/pause`, {}, owner.apiKey);
      expect(paused.status, paused.text).toBe(200);
    }
    await expectNothingPaid(wallet, async () => {
      const response = await paidFetch({ walletId: wallet.id, url: `${v2.url}/weather/evm` });
      expect(response.status, response.text).toBe(403);
      expect(expectErrorShape(response)).toMatchObject({ code: "PolicyViolation", reason });
    });
  });

  it.each([
    ["the payee's address", () => evmPayTo.toLowerCase()],
    ["the resource's hostname", () => "127.0.0.1"],
  ])("a whitelist naming %s admits the payment", async (_what, entry) => {
    const wallet = await fundedWallet({ whitelist: [entry()] });
    const response = await paidFetch({ walletId: wallet.id, url: `${v2.url}/weather/evm` });
    expect(response.status, response.text).toBe(200);
    expect(response.body.transaction).toMatchObject({ type: "x402", status: "confirmed" });
  });

  it("maxAmount below the price: 400 max_amount_exceeded, nothing signed", async () => {
    const wallet = await fundedWallet();
    await expectNothingPaid(wallet, async () => {
      const response = await paidFetch({
        walletId: wallet.id,
        url: `${v2.url}/weather/evm`,
        maxAmount: "0.009",
      });
      expect(response.status, response.text).toBe(400);
      expect(expectErrorShape(response)).toMatchObject({ reason: "max_amount_exceeded" });
    });
  });

  it("a wallet without the USDC: 422 insufficient_token, nothing signed", async () => {
    const wallet = await fundedWallet(undefined, 0n);
    await expectNothingPaid(wallet, async () => {
      const response = await paidFetch({ walletId: wallet.id, url: `${v2.url}/weather/evm` });
      expect(response.status, response.text).toBe(422);
      expect(expectErrorShape(response)).toMatchObject({
        code: "InsufficientFunds",
        reason: "insufficient_token",
      });
    });
  });

  it(`dailyLimit with ${MAX_FETCHES_PER_ACCOUNT} concurrent paid fetches (all an account may run at once): exactly the 3 the limit allows are paid and recorded`, async () => {
    const wallet = await fundedWallet({ dailyLimit: "0.03" });
    const before = await usdcBalance(chains.evm, wallet.evm.address);
    const settled = facilitator.settlements.length;
    const responses = await Promise.all(
      Array.from({ length: MAX_FETCHES_PER_ACCOUNT }, () =>
        paidFetch({ walletId: wallet.id, url: `${v2.url}/weather/evm` }),
      ),
    );
    const paid = responses.filter((r) => r.status === 200 && r.body.status === 200);
    const refused = responses.filter((r) => r.status === 403);
    expect(paid.length, responses.map((r) => r.text.slice(0, 200)).join("\n")).toBe(3);
    expect(refused).toHaveLength(MAX_FETCHES_PER_ACCOUNT - 3);
    for (const response of refused) expect(expectErrorShape(response).reason).toBe("daily_limit");
    expect(facilitator.settlements.slice(settled).map((s) => s.success)).toEqual(Array(3).fill(true));
    expect(await usdcBalance(chains.evm, wallet.evm.address)).toBe(before - 3n * PRICE);
    const rows = await history(wallet.id);
    expect(rows).toHaveLength(3);
    expect(rows.every((row) => row.type === "x402" && row.status === "confirmed")).toBe(true);
  });
});

describe("a 402 reached through a redirect", () => {
  /** A server on 127.0.0.1 that redirects every request to `target`, counting payments sent to it. */
  async function redirectingTo(target: string) {
    const seen = { requests: 0, payments: 0 };
    const hop = createServer((req, res) => {
      seen.requests += 1;
      if (req.headers["payment-signature"] || req.headers["x-payment"]) seen.payments += 1;
      res.writeHead(302, { location: target }).end();
    });
    await new Promise<void>((resolve) => hop.listen(0, "127.0.0.1", resolve));
    const port = (hop.address() as AddressInfo).port;
    return { seen, port, close: () => new Promise((resolve) => hop.close(resolve)) };
  }

  it("pays the resource the redirect led to (another origin, as http to https is) and records its URL", async () => {
    const wallet = await fundedWallet();
    const target = `${v2.url}/weather/evm`;
    const hop = await redirectingTo(target);
    const before = await usdcBalance(chains.evm, wallet.evm.address);
    try {
      const response = await paidFetch({ walletId: wallet.id, url: `http://127.0.0.1:${hop.port}/weather` });
      expect(response.status, response.text).toBe(200);
      // Sent to the URL first asked, the payment was dropped at the redirect to another origin: 402 again.
      expect(response.body).toMatchObject({
        status: 200,
        body: WEATHER,
        transaction: { type: "x402", status: "confirmed", resource: target },
      });
      expect(hop.seen.payments).toBe(0);
      expect(await usdcBalance(chains.evm, wallet.evm.address)).toBe(before - PRICE);
    } finally {
      await hop.close();
    }
  });

  it("a whitelisted host redirecting to another host does not admit that host's payee: 403, nothing signed", async () => {
    // The whitelist names localhost; localhost redirects to 127.0.0.1, whose 402 names a payee not on it.
    const wallet = await fundedWallet({ whitelist: ["localhost"] });
    const hop = await redirectingTo(`${v2.url}/weather/evm`);
    const settled = facilitator.settlements.length;
    const before = await usdcBalance(chains.evm, wallet.evm.address);
    try {
      const response = await paidFetch({ walletId: wallet.id, url: `http://localhost:${hop.port}/weather` });
      expect(response.status, response.text).toBe(403);
      expect(expectErrorShape(response)).toMatchObject({
        code: "PolicyViolation",
        reason: "recipient_not_allowed",
      });
      expect(hop.seen.requests).toBe(1);
      expect(facilitator.settlements.length).toBe(settled);
      expect(await usdcBalance(chains.evm, wallet.evm.address)).toBe(before);
      expect(await history(wallet.id)).toEqual([]);
    } finally {
      await hop.close();
    }
  });
});

describe("a payment the resource rejects", () => {
  it("keeps its place in the daily window until the chain decides: a rejected payment settled later is confirmed", async () => {
    const requirement = evmRequirement();
    const challenge = Buffer.from(
      JSON.stringify({
        x402Version: 2,
        error: "payment_required",
        resource: { url: "http://127.0.0.1/greedy" },
        accepts: [requirement],
      }),
    ).toString("base64");
    // Refuses every payment, but keeps the signed one it was sent, to settle it later.
    const kept: string[] = [];
    const greedy = createServer((req, res) => {
      const signature = req.headers["payment-signature"];
      if (typeof signature === "string") kept.push(signature);
      res
        .writeHead(402, { "payment-required": challenge, "content-type": "application/json" })
        .end(JSON.stringify({ error: signature ? "insufficient_funds_in_our_opinion" : "payment_required" }));
    });
    await new Promise<void>((resolve) => greedy.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(greedy.address() as AddressInfo).port}/greedy`;
    try {
      const wallet = await fundedWallet({ dailyLimit: "0.01" });
      const before = await usdcBalance(chains.evm, wallet.evm.address);
      const rejected = await paidFetch({ walletId: wallet.id, url });
      expect(rejected.status, rejected.text).toBe(200);
      // Not failed: the signed payment can still land until it expires, so it still holds its reservation.
      expect(rejected.body).toMatchObject({
        status: 402,
        transaction: { type: "x402", status: "pending", resource: url },
      });
      expect(rejected.body.transaction.failureReason).toContain("payment rejected by the resource");
      expect(kept).toHaveLength(1);
      const overLimit = await paidFetch({ walletId: wallet.id, url: `${v2.url}/weather/evm` });
      expect(expectErrorShape(overLimit).reason).toBe("daily_limit");

      // The server settles what it refused.
      const settled = await settleAtFacilitator(facilitator.url, kept[0] as string, requirement);
      expect(settled.success).toBe(true);
      expect(await usdcBalance(chains.evm, wallet.evm.address)).toBe(before - PRICE);
      // The money moved, and the record says so once the confirmer has read the chain.
      await server.service.confirmer.runOnce();
      const recorded = (await server.api.get(`/v1/transactions/${rejected.body.transactionId}`, owner.apiKey))
        .body;
      expect(recorded).toMatchObject({ status: "confirmed", txHash: settled.transaction });
      expect(recorded.failureReason).toBeUndefined();
    } finally {
      await new Promise((resolve) => greedy.close(resolve));
    }
  });
});

describe("a receipt that lies", () => {
  it.each(["evm", "solana"] as const)(
    "success with another payment's transaction (%s): not confirmed until the chain shows this payment, then with its own hash",
    async (kind) => {
      // A real settlement of another wallet's payment, for the liar to name.
      const other = await fundedWallet();
      const honest = await paidFetch({ walletId: other.id, url: `${v2.url}/weather/${kind}` });
      expect(honest.body.transaction, honest.text).toMatchObject({ status: "confirmed" });
      const otherTx = honest.body.transaction.txHash as string;

      const requirement = {
        scheme: "exact",
        amount: String(PRICE),
        maxTimeoutSeconds: 60,
        ...(kind === "evm"
          ? { network: "eip155:84532", asset: devnet.evm.usdc, payTo: evmPayTo, extra: devnet.evm.usdcEip712 }
          : {
              network: SOLANA_DEVNET_NETWORK,
              asset: devnet.solana.usdcMint,
              payTo: solanaPayTo,
              extra: { feePayer: facilitator.solanaFeePayer },
            }),
      };
      const challenge = Buffer.from(
        JSON.stringify({
          x402Version: 2,
          resource: { url: "http://127.0.0.1/liar" },
          accepts: [requirement],
        }),
      ).toString("base64");
      // Keeps the payment unsettled and claims it settled in another payment's transaction.
      const kept: string[] = [];
      const liar = createServer((req, res) => {
        const signature = req.headers["payment-signature"];
        if (typeof signature !== "string") {
          res.writeHead(402, { "payment-required": challenge, "content-type": "application/json" }).end("{}");
          return;
        }
        kept.push(signature);
        const receipt = { success: true, transaction: otherTx, network: requirement.network };
        res
          .writeHead(200, {
            "content-type": "application/json",
            "payment-response": Buffer.from(JSON.stringify(receipt)).toString("base64"),
          })
          .end(JSON.stringify(WEATHER));
      });
      await new Promise<void>((resolve) => liar.listen(0, "127.0.0.1", resolve));
      const url = `http://127.0.0.1:${(liar.address() as AddressInfo).port}/liar`;
      try {
        const wallet = await fundedWallet();
        const response = await paidFetch({ walletId: wallet.id, url });
        expect(response.status, response.text).toBe(200);
        expect(response.body.paymentReceipt).toMatchObject({ success: true, txHash: otherTx });
        expect(response.body.transaction).toMatchObject({ type: "x402", status: "pending" });
        expect(response.body.transaction.txHash).toBeUndefined();
        await server.service.confirmer.runOnce();
        const stillPending = await server.api.get(
          `/v1/transactions/${response.body.transactionId}`,
          owner.apiKey,
        );
        expect(stillPending.body).toMatchObject({ status: "pending" });

        // The liar settles the payment it kept: now the chain shows it, under its own transaction.
        const settled = await settleAtFacilitator(facilitator.url, kept[0] as string, requirement);
        expect(settled.success).toBe(true);
        expect(settled.transaction).not.toBe(otherTx);
        await server.service.confirmer.runOnce();
        const recorded = await server.api.get(
          `/v1/transactions/${response.body.transactionId}`,
          owner.apiKey,
        );
        expect(recorded.body).toMatchObject({ status: "confirmed", txHash: settled.transaction });
      } finally {
        await new Promise((resolve) => liar.close(resolve));
      }
    },
  );
});

describe("a payment carrying spendAuthorization.decisionId (the SDK's gate)", () => {
  /** Asks the daemon, as the agent, to approve this payment's facts (overridden where given). */
  async function authorize(overrides: Record<string, unknown> = {}) {
    const reply = await daemon.call<{ approved: boolean; decision_id: string }>("POST", "/spend/authorize", {
      token: agentToken,
      body: {
        provider: "svc",
        network: "eip155:84532",
        asset: devnet.evm.usdc,
        amount: String(PRICE),
        per_call_cap: "5000000",
        credits: 1,
        destination: evmPayTo,
        ...overrides,
      },
    });
    expect(reply.status).toBe(200);
    expect(reply.body.approved).toBe(true);
    return reply.body.decision_id;
  }

  it("is paid when the decision approved exactly this payment, and the transaction shows it", async () => {
    const wallet = await fundedWallet({ requireSpendAuthorization: true });
    const decisionId = await authorize();
    const response = await paidFetch({
      walletId: wallet.id,
      url: `${v2.url}/weather/evm`,
      maxAmount: "0.01",
      spendAuthorization: { decisionId },
    });
    expect(response.status, response.text).toBe(200);
    expect(response.body).toMatchObject({
      status: 200,
      spendDecisionId: decisionId,
      transaction: { status: "confirmed", spendDecisionId: decisionId },
    });
  });

  it("is refused, nothing signed, when the decision differs from the payment or is missing where required", async () => {
    const wallet = await fundedWallet({ requireSpendAuthorization: true });
    const settled = facilitator.settlements.length;
    const url = `${v2.url}/weather/evm`;
    const cheaper = await authorize({ amount: "5000" });
    const mismatch = await paidFetch({
      walletId: wallet.id,
      url,
      spendAuthorization: { decisionId: cheaper },
    });
    expect(mismatch.status, mismatch.text).toBe(403);
    expect(expectErrorShape(mismatch)).toMatchObject({
      reason: "spend_authorization_mismatch",
      details: { field: "amount", authorized: "5000", requested: String(PRICE) },
    });
    const missing = await paidFetch({ walletId: wallet.id, url });
    expect(missing.status, missing.text).toBe(403);
    expect(expectErrorShape(missing).reason).toBe("spend_authorization_required");
    expect(facilitator.settlements.length).toBe(settled);
    expect(await history(wallet.id)).toEqual([]);
  });
});

describe("never paying twice", () => {
  it("a retry with the same Idempotency-Key answers the first response and pays nothing more", async () => {
    const wallet = await fundedWallet();
    const settled = facilitator.settlements.length;
    const served = v2.served.get("/weather/evm") ?? 0;
    const headers = { "idempotency-key": `x402-${randomBytes(6).toString("hex")}` };
    const body = { walletId: wallet.id, url: `${v2.url}/weather/evm` };
    const first = await paidFetch(body, owner.apiKey, headers);
    const again = await paidFetch(body, owner.apiKey, headers);
    expect(first.status, first.text).toBe(200);
    expect(again.status).toBe(200);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.body).toEqual(first.body);
    expect(facilitator.settlements.length - settled).toBe(1);
    expect((v2.served.get("/weather/evm") ?? 0) - served).toBe(1);
    expect(await history(wallet.id)).toHaveLength(1);
  });

  it("an answer that paid nothing is not kept under its key (it may be 2 MiB): a retry asks the resource again", async () => {
    const wallet = await fundedWallet(undefined, 0n);
    let asked = 0;
    const resource = createServer((_request, response) => {
      asked++;
      response.writeHead(200, { "content-type": "application/json" }).end('{"free":true}');
    });
    await new Promise<void>((resolve) => resource.listen(0, "127.0.0.1", resolve));
    onTestFinished(() => void resource.close());
    const url = `http://127.0.0.1:${(resource.address() as AddressInfo).port}/free`;
    const headers = { "idempotency-key": `free-${randomBytes(6).toString("hex")}` };
    const body = { walletId: wallet.id, url };
    const first = await paidFetch(body, owner.apiKey, headers);
    const again = await paidFetch(body, owner.apiKey, headers);
    expect(first.status, first.text).toBe(200);
    expect(again.status, again.text).toBe(200);
    expect(again.headers.get("idempotent-replayed")).toBe("false");
    expect(asked).toBe(2);
    const kept = await server.service.store.db
      .select({ key: idempotencyKeys.key })
      .from(idempotencyKeys)
      .where(eq(idempotencyKeys.key, `:${headers["idempotency-key"]}`));
    expect(kept).toEqual([]);
  });

  // Both at once: each waits out the service's whole SVC_X402_FETCH_TIMEOUT_MS, and each wallet's
  // settlement is told from the other's by its payer.
  it.concurrent.each(["evm", "solana"] as const)(
    "a facilitator that settles but never answers (%s): 502 payment_outcome_unknown, no second payment, the transaction completes from the chain",
    async (kind) => {
      const wallet = await fundedWallet();
      const chain = chains[kind];
      const payer = kind === "evm" ? wallet.evm.address : wallet.solana.address;
      const before = await usdcBalance(chain, payer);
      const settledFor = () => facilitator.settlements.filter((settlement) => settlement.payer === payer);
      let release = () => {};
      heldSettleAnswers.set(
        payer,
        new Promise<void>((resolve) => {
          release = resolve;
        }),
      );
      const headers = { "idempotency-key": `x402-${randomBytes(6).toString("hex")}` };
      const body = { walletId: wallet.id, url: `${v2.url}/weather/${kind}` };
      try {
        const response = await paidFetch(body, owner.apiKey, headers);
        expect(response.status, response.text).toBe(502);
        const error = expectErrorShape(response);
        expect(error.reason).toBe("payment_outcome_unknown");
        const transactionId = error.details?.transactionId as string;
        const settledTx = await waitForSettled(server.api, owner.apiKey, transactionId);
        const settlement = settledFor();
        expect(settlement).toEqual([expect.objectContaining({ success: true })]);
        expect(settledTx).toMatchObject({
          type: "x402",
          status: "confirmed",
          chain: chain.name,
          txHash: settlement[0]?.transaction,
          resource: body.url,
        });
        // The retry is answered from the first attempt: the same refusal, nothing paid again.
        const retry = await paidFetch(body, owner.apiKey, headers);
        expect(retry.status).toBe(502);
        expect(expectErrorShape(retry).details).toEqual({ transactionId });
        expect(settledFor()).toHaveLength(1);
        expect(await usdcBalance(chain, payer)).toBe(before - PRICE);
        expect(await history(wallet.id)).toHaveLength(1);
      } finally {
        heldSettleAnswers.delete(payer);
        release();
      }
    },
  );

  it.each(["evm", "solana"] as const)(
    "a resource that settles but answers without a receipt (%s): 200, the transaction confirmed from the chain, paid once",
    async (kind) => {
      const requirement = {
        scheme: "exact",
        amount: String(PRICE),
        maxTimeoutSeconds: 60,
        ...(kind === "evm"
          ? { network: "eip155:84532", asset: devnet.evm.usdc, payTo: evmPayTo, extra: devnet.evm.usdcEip712 }
          : {
              network: SOLANA_DEVNET_NETWORK,
              asset: devnet.solana.usdcMint,
              payTo: solanaPayTo,
              extra: { feePayer: facilitator.solanaFeePayer },
            }),
      };
      const challenge = Buffer.from(
        JSON.stringify({
          x402Version: 2,
          resource: { url: "http://127.0.0.1/quiet" },
          accepts: [requirement],
        }),
      ).toString("base64");
      const settlements: { success: boolean; transaction: string }[] = [];
      // Settles the payment with the facilitator itself, then serves the data with no PAYMENT-RESPONSE.
      const quiet = createServer(async (req, res) => {
        const signature = req.headers["payment-signature"];
        if (typeof signature !== "string") {
          res.writeHead(402, { "payment-required": challenge, "content-type": "application/json" }).end("{}");
          return;
        }
        settlements.push(await settleAtFacilitator(facilitator.url, signature, requirement));
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(WEATHER));
      });
      await new Promise<void>((resolve) => quiet.listen(0, "127.0.0.1", resolve));
      const url = `http://127.0.0.1:${(quiet.address() as AddressInfo).port}/quiet`;
      try {
        const wallet = await fundedWallet();
        const chain = chains[kind];
        const payer = kind === "evm" ? wallet.evm.address : wallet.solana.address;
        const before = await usdcBalance(chain, payer);
        const response = await paidFetch({ walletId: wallet.id, url });
        expect(response.status, response.text).toBe(200);
        expect(response.body.paymentReceipt).toBeUndefined();
        expect(settlements).toEqual([expect.objectContaining({ success: true })]);
        expect(response.body).toMatchObject({
          status: 200,
          body: WEATHER,
          transaction: { type: "x402", status: "confirmed", txHash: settlements[0]?.transaction },
        });
        expect(await usdcBalance(chain, payer)).toBe(before - PRICE);
        expect(await history(wallet.id)).toHaveLength(1);
      } finally {
        await new Promise((resolve) => quiet.close(resolve));
      }
    },
  );
});

describe("payments alike in every field", () => {
  it("several at once to one payee, price and seller's memo on Solana: each its own transfer, each record settled by its own", async () => {
    // Ed25519 signatures are deterministic: two payments alike in every field and signed against one blockhash
    // were one transaction, settled once and claimed by every record.
    const requirement = {
      scheme: "exact",
      network: SOLANA_DEVNET_NETWORK,
      amount: String(PRICE),
      asset: devnet.solana.usdcMint,
      payTo: solanaPayTo,
      maxTimeoutSeconds: 60,
      extra: { feePayer: facilitator.solanaFeePayer, memo: "order-42" },
    };
    const challenge = Buffer.from(
      JSON.stringify({ x402Version: 2, resource: { url: "http://127.0.0.1/order" }, accepts: [requirement] }),
    ).toString("base64");
    const received: string[] = [];
    const settlements: { success: boolean; transaction: string }[] = [];
    // Settles each payment with the facilitator and serves the data only once it has settled.
    const seller = createServer(async (req, res) => {
      const signature = req.headers["payment-signature"];
      if (typeof signature !== "string") {
        res.writeHead(402, { "payment-required": challenge, "content-type": "application/json" }).end("{}");
        return;
      }
      received.push(JSON.parse(Buffer.from(signature, "base64").toString("utf8")).payload.transaction);
      const settlement = await settleAtFacilitator(facilitator.url, signature, requirement);
      settlements.push(settlement);
      if (settlement.success) res.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}');
      else
        res.writeHead(402, { "payment-required": challenge, "content-type": "application/json" }).end("{}");
    });
    await new Promise<void>((resolve) => seller.listen(0, "127.0.0.1", resolve));
    onTestFinished(() => void seller.close());
    const url = `http://127.0.0.1:${(seller.address() as AddressInfo).port}/order`;
    const wallet = await fundedWallet();
    const before = await usdcBalance(chains.solana, wallet.solana.address);

    const responses = await Promise.all(
      Array.from({ length: 4 }, () => paidFetch({ walletId: wallet.id, url, chain: "solana-devnet" })),
    );
    expect(responses.map((response) => response.status)).toEqual([200, 200, 200, 200]);
    expect(new Set(received).size).toBe(4);
    expect(settlements.filter((settlement) => settlement.success)).toHaveLength(4);
    const recorded = await history(wallet.id);
    expect(recorded.map((row) => row.status)).toEqual(["confirmed", "confirmed", "confirmed", "confirmed"]);
    expect(new Set(recorded.map((row) => row.txHash))).toEqual(
      new Set(settlements.map((s) => s.transaction)),
    );
    expect(await usdcBalance(chains.solana, wallet.solana.address)).toBe(before - 4n * PRICE);
  });

  it("the store records a signed payment once: the same payment again is refused, and nothing more is recorded", async () => {
    // Two instances on one store can still sign alike (each takes the compute-unit limits in turn from its own
    // random start): the store keeps one.
    const wallet = await fundedWallet(undefined, 0n);
    const spend = {
      walletId: wallet.id,
      type: "x402",
      chain: "solana-devnet",
      token: chains.solana.tokens[0] as ChainConfig["tokens"][number],
      amount: PRICE,
      from: wallet.solana.address,
      to: solanaPayTo,
      usdMicros: PRICE,
      resource: "http://127.0.0.1/order",
    } as const;
    const payerSignature = "1".repeat(64);
    const signed = {
      x402Payment: {
        version: 2,
        payer: wallet.solana.address,
        // Its blockhash long gone: the confirmer ends it as expired.
        onChain: {
          kind: "solana",
          payerSignature,
          sourceTokenAccount: wallet.solana.address,
          lastValidBlockHeight: "0",
        },
      },
      x402PaymentKey: `solana:${payerSignature}`,
    };
    const db = server.service.store.db;
    await admitSpend(db, spend, { sign: async () => signed });
    const again = await admitSpend(db, spend, { sign: async () => signed }).catch((error: unknown) => error);
    expect(again).toMatchObject({ status: 409, reason: "payment_not_unique" });
    expect(await history(wallet.id)).toHaveLength(1);
  });
});

describe("who may fetch, and what", () => {
  it("an agent key bound to another wallet gets 404; a read key 403", async () => {
    const mine = await fundedWallet(undefined, 0n);
    const other = await fundedWallet(undefined, 0n);
    const bound = await server.api.post(
      "/v1/api-keys",
      { name: "bound agent", role: "agent", walletIds: [mine.id] },
      owner.accessToken,
    );
    const reader = await server.api.post("/v1/api-keys", { name: "reader", role: "read" }, owner.accessToken);
    const url = `${v2.url}/free`;
    const refused = await paidFetch({ walletId: other.id, url }, bound.body.key);
    expect(refused.status, refused.text).toBe(404);
    expect(expectErrorShape(refused).code).toBe("NotFound");
    const allowed = await paidFetch({ walletId: mine.id, url }, bound.body.key);
    expect(allowed.status, allowed.text).toBe(200);
    const read = await paidFetch({ walletId: mine.id, url }, reader.body.key);
    expect(read.status).toBe(403);
    expect(expectErrorShape(read).reason).toBe("insufficient_role");
  });

  it("another account's key naming this account's wallet gets 404, and nothing is fetched or paid", async () => {
    const wallet = await fundedWallet();
    const stranger = await seedAccount(server.api, "stranger");
    const settled = facilitator.settlements.length;
    const before = await usdcBalance(chains.evm, wallet.evm.address);
    const hop = createServer((_req, res) => res.writeHead(500).end());
    let contacted = 0;
    hop.on("request", () => {
      contacted += 1;
    });
    await new Promise<void>((resolve) => hop.listen(0, "127.0.0.1", resolve));
    try {
      for (const url of [
        `${v2.url}/weather/evm`,
        `http://127.0.0.1:${(hop.address() as AddressInfo).port}/`,
      ]) {
        const response = await paidFetch({ walletId: wallet.id, url }, stranger.apiKey);
        expect(response.status, response.text).toBe(404);
        expect(expectErrorShape(response).code).toBe("NotFound");
      }
      expect(contacted).toBe(0);
      expect(facilitator.settlements.length).toBe(settled);
      expect(await usdcBalance(chains.evm, wallet.evm.address)).toBe(before);
      expect(await history(wallet.id)).toEqual([]);
    } finally {
      await new Promise((resolve) => hop.close(resolve));
    }
  });

  it(`runs at most ${MAX_FETCHES_PER_ACCOUNT} fetches of one account at once: the next is 429 too_many_fetches, another account's goes on`, async () => {
    const wallet = await fundedWallet(undefined, 0n);
    const held: (() => void)[] = [];
    const resource = createServer((_request, response) => {
      held.push(() => response.writeHead(200, { "content-type": "application/json" }).end("{}"));
    });
    await new Promise<void>((resolve) => resource.listen(0, "127.0.0.1", resolve));
    onTestFinished(() => {
      resource.closeAllConnections();
      resource.close();
    });
    const url = `http://127.0.0.1:${(resource.address() as AddressInfo).port}/slow`;
    const running = Array.from({ length: MAX_FETCHES_PER_ACCOUNT }, () =>
      paidFetch({ walletId: wallet.id, url }),
    );
    await eventually(() => held.length === MAX_FETCHES_PER_ACCOUNT, {
      describe: "the account's fetches to reach the resource",
    });
    const refused = await paidFetch({ walletId: wallet.id, url });
    expect(refused.status, refused.text).toBe(429);
    expect(expectErrorShape(refused).reason).toBe("too_many_fetches");
    expect(refused.headers.get("retry-after")).toBe("1");

    // Another account is not held up by this one.
    const other = await seedAccount(server.api);
    const theirs = await server.api.post(
      "/v1/wallets",
      { name: "theirs", chains: ["base-sepolia"] },
      other.accessToken,
    );
    const fetched = await server.api.post(
      "/v1/x402/fetch",
      { walletId: theirs.body.id, url: `${v2.url}/free` },
      other.apiKey,
    );
    expect(fetched.status, fetched.text).toBe(200);
    for (const release of held) release();
    for (const response of await Promise.all(running)) expect(response.status).toBe(200);
    // Done, the account fetches again.
    const after = paidFetch({ walletId: wallet.id, url });
    await eventually(() => held.length === MAX_FETCHES_PER_ACCOUNT + 1);
    held.at(-1)?.();
    expect((await after).status).toBe(200);
  });

  it("sends the resource the caller's headers, never the caller's own credentials to this service", async () => {
    const wallet = await fundedWallet(undefined, 0n);
    const seen: Record<string, string | string[] | undefined>[] = [];
    const echo = createServer((req, res) => {
      seen.push(req.headers);
      res.writeHead(200, { "content-type": "text/plain" }).end("ok");
    });
    await new Promise<void>((resolve) => echo.listen(0, "127.0.0.1", resolve));
    try {
      const response = await paidFetch(
        {
          walletId: wallet.id,
          url: `http://127.0.0.1:${(echo.address() as AddressInfo).port}/`,
          headers: { "x-for-the-resource": "yes" },
        },
        owner.apiKey,
        { "idempotency-key": `echo-${randomBytes(6).toString("hex")}` },
      );
      expect(response.status, response.text).toBe(200);
      expect(seen).toHaveLength(1);
      expect(seen[0]?.["x-for-the-resource"]).toBe("yes");
      expect(seen[0]?.authorization).toBeUndefined();
      expect(seen[0]?.["idempotency-key"]).toBeUndefined();
      expect(JSON.stringify(seen[0])).not.toContain(owner.apiKey);
    } finally {
      await new Promise((resolve) => echo.close(resolve));
    }
  });

  it.each([
    ["no url", {}],
    ["a URL that is not http", { url: "ftp://127.0.0.1/x" }],
    ["a bad maxAmount", { url: "http://127.0.0.1/x", maxAmount: "1e3" }],
    ["an unknown field", { url: "http://127.0.0.1/x", price: "1" }],
    ["a bad header name", { url: "http://127.0.0.1/x", headers: { "bad name": "x" } }],
    ["a bad method", { url: "http://127.0.0.1/x", method: "CONNECT" }],
    ["a body on a GET", { url: "http://127.0.0.1/x", body: "x" }],
  ])("400 for %s", async (_what, body) => {
    const wallet = await fundedWallet(undefined, 0n);
    const response = await paidFetch({ walletId: wallet.id, ...body });
    expect(response.status, response.text).toBe(400);
    expect(expectErrorShape(response).code).toBe("ValidationError");
  });

  it("refuses a redirect to the metadata endpoint and a private address: 400 destination_not_allowed", async () => {
    const wallet = await fundedWallet(undefined, 0n);
    for (const url of [
      `${redirectorUrl}/start`,
      "http://10.0.0.1/x",
      "http://169.254.169.254/latest/meta-data/",
    ]) {
      const response = await paidFetch({ walletId: wallet.id, url });
      expect(response.status, response.text).toBe(400);
      expect(expectErrorShape(response)).toMatchObject({
        code: "ValidationError",
        reason: "destination_not_allowed",
      });
    }
  });

  it("never reaches the service's own backends, loopback exempt or not: 400 destination_not_allowed", async () => {
    const wallet = await fundedWallet(undefined, 0n);
    const agent = await server.api.post(
      "/v1/api-keys",
      { name: "agent", role: "agent", walletIds: [wallet.id] },
      owner.accessToken,
    );
    // Reached, the EVM node would let the agent send from any address it names, its wallet's included.
    const impersonate = JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "anvil_impersonateAccount",
      params: [wallet.evm.address],
    });
    for (const url of [
      devnet.evm.rpcUrl,
      devnet.evm.rpcUrl.replace("127.0.0.1", "localhost"),
      devnet.solana.rpcUrl,
      daemon.url,
      // The service itself: a request to it would come from this machine, with headers the caller chose.
      `${server.url}/v1/wallets`,
    ]) {
      // A probe (what a client's spend gate asks first) is held to the same destinations.
      for (const probe of [{}, { probe: true }]) {
        const response = await paidFetch(
          {
            walletId: wallet.id,
            url,
            method: "POST",
            body: impersonate,
            headers: { "content-type": "application/json" },
            ...probe,
          },
          agent.body.key,
        );
        expect(response.status, `${url}: ${response.text}`).toBe(400);
        expect(expectErrorShape(response)).toMatchObject({
          reason: "destination_not_allowed",
          details: { kind: "backend" },
        });
      }
    }
  });

  it("refuses loopback, by address or by name, where SVC_OUTBOUND_ALLOW does not exempt it", async () => {
    const strict = await plainService();
    const account = await seedAccount(strict.api);
    const created = await strict.api.post(
      "/v1/wallets",
      { name: "strict", chains: ["base-sepolia"] },
      account.apiKey,
    );
    // By address, and by a name that resolves to loopback.
    for (const url of [`${v2.url}/weather/evm`, `${v2.url.replace("127.0.0.1", "localhost")}/weather/evm`]) {
      const response = await strict.api.post(
        "/v1/x402/fetch",
        { walletId: created.body.id, url },
        account.apiKey,
      );
      expect(response.status, response.text).toBe(400);
      expect(expectErrorShape(response).reason).toBe("destination_not_allowed");
    }
    const history = await strict.api.get(`/v1/wallets/${created.body.id}/transactions`, account.apiKey);
    expect(history.body.data).toEqual([]);
  });
});

describe("GET /v1/x402/services: discovery from the facilitator", () => {
  it("lists what the facilitator's Bazaar lists, filtered by category and query, at most limit", async () => {
    const weather = {
      resource: `${v2.url}/weather/evm`,
      x402Version: 2 as const,
      description: "Weather in Lisbon",
      tags: ["weather"],
      accepts: [{ scheme: "exact", network: "eip155:84532", amount: String(PRICE), payTo: evmPayTo }],
    };
    facilitator.listResource(weather);
    facilitator.listResource({
      resource: `${v2.url}/quotes`,
      x402Version: 2,
      description: "Stock quotes",
      tags: ["finance"],
      accepts: [],
    });
    const all = await server.api.get("/v1/x402/services", owner.apiKey);
    expect(all.status, all.text).toBe(200);
    expect(all.body.data.map((s: { resource: string }) => s.resource)).toEqual([
      weather.resource,
      `${v2.url}/quotes`,
    ]);
    expect(all.body.data[0]).toMatchObject({ ...weather, type: "http" });
    const byCategory = await server.api.get("/v1/x402/services?category=Weather", owner.apiKey);
    expect(byCategory.body.data.map((s: { resource: string }) => s.resource)).toEqual([weather.resource]);
    const byQuery = await server.api.get("/v1/x402/services?query=stock", owner.apiKey);
    expect(byQuery.body.data.map((s: { resource: string }) => s.resource)).toEqual([`${v2.url}/quotes`]);
    const limited = await server.api.get("/v1/x402/services?limit=1", owner.apiKey);
    expect(limited.body.data).toHaveLength(1);
    const none = await server.api.get("/v1/x402/services?category=sports", owner.apiKey);
    expect(none.body.data).toEqual([]);
    const bad = await server.api.get("/v1/x402/services?limit=0", owner.apiKey);
    expect(bad.status).toBe(400);
  });

  it("answers 502 discovery_unavailable for a facilitator without discovery, and without a facilitator", async () => {
    const plain = await startLocalFacilitator(devnet, { discovery: false });
    const configured = await createTestServer({
      devnet,
      env: { ...testnetProfileOnLocalChains(devnet), SVC_X402_FACILITATOR_URL: plain.url },
    });
    const unconfigured = await plainService();
    try {
      for (const target of [configured, unconfigured]) {
        const account = await seedAccount(target.api);
        const response = await target.api.get("/v1/x402/services", account.apiKey);
        expect(response.status, response.text).toBe(502);
        expect(expectErrorShape(response)).toMatchObject({
          code: "InternalError",
          reason: "discovery_unavailable",
        });
      }
    } finally {
      await configured.close();
      await plain.stop();
    }
  });
});

describe("the confirmer, when a chain's node fails", () => {
  let quiet: Server;
  let quietUrl: string;

  beforeAll(async () => {
    const challenge = Buffer.from(
      JSON.stringify({
        x402Version: 2,
        resource: { url: "http://127.0.0.1/quiet" },
        accepts: [evmRequirement()],
      }),
    ).toString("base64");
    // Takes each payment and answers without a receipt, settling nothing: the payments stay pending.
    quiet = createServer((req, res) => {
      if (typeof req.headers["payment-signature"] !== "string") {
        res.writeHead(402, { "payment-required": challenge, "content-type": "application/json" }).end("{}");
        return;
      }
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(WEATHER));
    });
    await new Promise<void>((resolve) => quiet.listen(0, "127.0.0.1", resolve));
    quietUrl = `http://127.0.0.1:${(quiet.address() as AddressInfo).port}/quiet`;
  });
  afterAll(() => new Promise((resolve) => quiet?.close(resolve)));

  /**
   * A service reaching base-sepolia through a gate, with a payer holding USDC and gas and `payments` x402
   * payments left pending; its confirmer passes only when the test runs one.
   */
  async function gatedPayer(payments: number) {
    const gate = await RpcGate.start(devnet.evm.rpcUrl);
    const gated = await createTestServer({
      devnet,
      env: {
        ...testnetProfileOnLocalChains(devnet),
        SVC_RPC_BASE_SEPOLIA: gate.url,
        SVC_OUTBOUND_ALLOW: "127.0.0.0/8",
        SVC_CONFIRMER_INTERVAL_MS: "3600000",
      },
    });
    onTestFinished(async () => {
      await gated.close();
      await gate.close();
    });
    const { apiKey } = await seedAccount(gated.api);
    const wallet = await gated.api.post("/v1/wallets", { name: "payer", chains: ["base-sepolia"] }, apiKey);
    await fundEvm(devnet, wallet.body.evm.address, { usdc: USDC, eth: 10n ** 17n });
    for (let i = 0; i < payments; i++) {
      const paid = await gated.api.post(
        "/v1/x402/fetch",
        { walletId: wallet.body.id, url: quietUrl },
        apiKey,
      );
      expect(paid.status, paid.text).toBe(200);
      expect(paid.body.transaction).toMatchObject({ type: "x402", status: "pending" });
    }
    /** How many rows the log says one pass could not reconcile. */
    const unreconciledInAPass = async () => {
      const before = gated.logs.lines.length;
      await gated.service.confirmer.runOnce();
      return gated.logs.lines
        .slice(before)
        .map((line) => JSON.parse(line) as { msg?: string })
        .filter((entry) => entry.msg === "could not reconcile a pending spend; will retry").length;
    };
    return { gate, gated, apiKey, walletId: wallet.body.id as string, unreconciledInAPass };
  }

  // The provider refuses eth_call (a payment's authorizationState read), as a plan without it would.
  const refusingEthCall = (call: { methods: string[] }) =>
    call.methods.includes("eth_call") ? ("drop" as const) : ("forward" as const);

  it("that answers nothing ends the pass at the first x402 payment, rather than waiting on each in turn", async () => {
    const { gate, unreconciledInAPass } = await gatedPayer(3);
    gate.decide = () => "drop";
    // One payment found the chain unreachable, and so did the cheapest read: the others wait for the next pass.
    expect(await unreconciledInAPass()).toBe(1);
  });

  it("that refuses only what x402 payments' searches need goes on past them, and confirms a send", async () => {
    const { gate, gated, apiKey, walletId, unreconciledInAPass } = await gatedPayer(2);
    const sent = await gated.api.post(
      `/v1/wallets/${walletId}/send`,
      { to: evmPayTo, amount: "0.01", chain: "base-sepolia" },
      apiKey,
    );
    expect(sent.status, sent.text).toBe(201);
    // Deep enough for base-sepolia's 2 confirmations.
    await createTestClient({ mode: "anvil", transport: http(devnet.evm.rpcUrl) }).mine({ blocks: 2 });
    gate.decide = refusingEthCall;
    // Both payments were tried: the cheapest read answered after the first failed.
    expect(await unreconciledInAPass()).toBe(2);
    const send = await gated.api.get(`/v1/transactions/${sent.body.id}`, apiKey);
    expect(send.body).toMatchObject({ type: "send", status: "confirmed" });
  });

  it("that answers its cheapest read but no row's ends the pass after 3 such rows", async () => {
    const { gate, unreconciledInAPass } = await gatedPayer(5);
    gate.decide = refusingEthCall;
    expect(await unreconciledInAPass()).toBe(3);
  });
});
