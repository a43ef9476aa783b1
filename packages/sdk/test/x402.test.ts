/**
 * `wallet.fetch` and `svc.x402.discover` over real sockets: a real service, a real daemon, and the x402
 * reference implementation on the local chains (the facilitator from `@x402/core` settling on a devnet, a
 * resource server from `@x402/express`). As in the service's own x402 tests, the devnet's EVM chain has
 * Base Sepolia's id and the service runs its testnet profile, so `@x402/svm` accepts the Solana side.
 */

import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
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
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testnetProfileOnLocalChains } from "../../server/test/support/chains.ts";
import { createTestServer, seedAccount, type TestServer } from "../../server/test/support/test-server.ts";
import {
  SvcPaymentRejectedError,
  SvcPolicyViolationError,
  SvcSpendDeniedError,
  SvcValidationError,
  SvcWallet,
  type SvcWalletOptions,
  type Wallet,
} from "../src/index.ts";
import {
  AGENT_CAPABILITIES,
  auditRowsOf,
  countingFetch,
  startTestDaemon,
  type TestDaemon,
  USDC,
} from "./support.ts";

const PRICE = 10_000n; // 0.01 USDC
const WEATHER = { city: "Lisbon", forecast: "sunny", celsius: 21 };
const CHAINS = ["base-sepolia", "solana-devnet"];

let devnet: Devnet;
let daemon: TestDaemon;
let agentToken: string;
let facilitator: LocalFacilitator;
let resources: ResourceServer;
let resourcesV1: ResourceServer;
let refusing: Server;
let refusingUrl: string;
let server: TestServer;
let accessToken: string;
let admin: SvcWallet;
let payee: Wallet;

function client(options: SvcWalletOptions = {}): SvcWallet {
  return new SvcWallet({ apiKey: accessToken, baseUrl: `${server.url}/v1`, ...options });
}

const authz = (extra: Record<string, unknown> = {}) => ({
  gatewayUrl: daemon.url,
  token: agentToken,
  ...extra,
});

beforeAll(async () => {
  devnet = await startDevnet({ evmChainId: 84532 });
  facilitator = await startLocalFacilitator(devnet);
  daemon = await startTestDaemon();
  agentToken = await daemon.identity("agent", AGENT_CAPABILITIES, { budgetCredits: 10_000_000 });
  const serviceToken = await daemon.identity("svc-service", ["wallet.spend.verify"]);
  server = await createTestServer({
    devnet,
    env: {
      ...testnetProfileOnLocalChains(devnet),
      SVC_OUTBOUND_ALLOW: "127.0.0.0/8",
      SVC_AUTHZD_URL: daemon.url,
      SVC_AUTHZD_TOKEN: serviceToken,
      SVC_X402_FACILITATOR_URL: facilitator.url,
    },
  });
  const account = await seedAccount(server.api, "sdk-x402");
  accessToken = account.accessToken;
  admin = client();
  // The payee is a Svc wallet too, so its balances are read the way a user reads them.
  payee = await admin.wallet.create({ name: "payee", chains: CHAINS });
  await createUsdcAccount(devnet, payee.solana?.address as string);
  resources = await startResourceServerV2(
    facilitator.url,
    [
      {
        path: "/weather/evm",
        accepts: [
          {
            network: "eip155:84532",
            payTo: payee.evm?.address as string,
            amount: String(PRICE),
            asset: devnet.evm.usdc,
            extra: devnet.evm.usdcEip712,
          },
        ],
        body: WEATHER,
        description: "Weather in Lisbon, paid on EVM",
      },
      {
        path: "/weather/solana",
        accepts: [
          {
            network: SOLANA_DEVNET_NETWORK,
            payTo: payee.solana?.address as string,
            amount: String(PRICE),
            asset: devnet.solana.usdcMint,
          },
        ],
        body: WEATHER,
      },
    ],
    { free: { "/free": { free: true } } },
  );
  resourcesV1 = await startResourceServerV1(facilitator.url, [
    {
      path: "/weather/evm",
      network: "base-sepolia",
      payTo: payee.evm?.address as string,
      amount: String(PRICE),
      asset: { address: devnet.evm.usdc, decimals: 6, eip712: devnet.evm.usdcEip712 },
      body: WEATHER,
    },
  ]);
  // A v1 server that refuses every payment it is sent with its own reason.
  refusing = createServer((req, res) => {
    const paid = req.headers["x-payment"] !== undefined;
    res.writeHead(402, { "content-type": "application/json" }).end(
      JSON.stringify({
        x402Version: 1,
        error: paid ? "invalid_exact_evm_payload_signature" : "X-PAYMENT header is required",
        accepts: [
          {
            scheme: "exact",
            network: "eip155:84532",
            maxAmountRequired: String(PRICE),
            resource: `${refusingUrl}/weather`,
            description: "refuses to be paid",
            mimeType: "application/json",
            payTo: payee.evm?.address,
            maxTimeoutSeconds: 60,
            asset: devnet.evm.usdc,
            extra: devnet.evm.usdcEip712,
          },
        ],
      }),
    );
  });
  await new Promise<void>((resolve) => refusing.listen(0, "127.0.0.1", resolve));
  refusingUrl = `http://127.0.0.1:${(refusing.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await server?.close();
  await new Promise((resolve) => refusing?.close(resolve));
  await resources?.stop();
  await resourcesV1?.stop();
  await facilitator?.stop();
  await daemon?.stop({ removeHome: true });
  await devnet?.stop();
});

/** A wallet on both chains holding 5 USDC on each (and no gas: x402 payments need none). */
async function fundedWallet(policy: Record<string, unknown> = { maxPerTx: "100" }): Promise<Wallet> {
  const wallet = await admin.wallet.create({ name: "payer", chains: CHAINS, policy });
  await fundEvm(devnet, wallet.evm?.address as `0x${string}`, { usdc: 5n * USDC });
  await fundSolana(devnet, wallet.solana?.address as never, { usdc: 5n * USDC });
  return wallet;
}

/** Atomic USDC of a wallet on a chain, as `wallet.balance()` reads it. */
async function usdcOn(wallet: Wallet, chain: string): Promise<bigint> {
  const { balances } = await wallet.balance();
  const row = balances.find((b) => b.chain === chain && b.token === "USDC");
  const [whole = "0", fraction = ""] = (row?.amount ?? "0").split(".");
  return BigInt(whole) * USDC + BigInt(fraction.padEnd(6, "0"));
}

const decided = () => auditRowsOf(daemon, "spend_authorization_decided");
const settledRows = () => auditRowsOf(daemon, "spend_settled");

describe("wallet.fetch without the gate: the service pays", () => {
  it("pays a v2 resource on EVM: a standard 200 Response with the data, the receipt and the confirmed x402 transaction; balances moved by the price", async () => {
    const wallet = await fundedWallet();
    const before = {
      payer: await usdcOn(wallet, "base-sepolia"),
      payee: await usdcOn(payee, "base-sepolia"),
    };
    const url = `${resources.url}/weather/evm`;

    const response = await wallet.fetch(url);

    expect(response).toBeInstanceOf(Response);
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^application\/json/);
    expect(await response.json()).toEqual(WEATHER);
    expect(response.amountCharged).toBe("0.01");
    expect(response.receipt).toMatchObject({
      success: true,
      network: "eip155:84532",
      payer: wallet.evm?.address,
    });
    expect(response.receipt?.txHash).toMatch(/^0x[0-9a-f]{64}$/);
    expect(response.transaction).toMatchObject({
      type: "x402",
      status: "confirmed",
      txHash: response.receipt?.txHash,
      resource: url,
      amount: "0.01",
      token: "USDC",
      chain: "base-sepolia",
      to: payee.evm?.address,
    });
    const history = await wallet.transactions({ type: "x402" });
    expect(history.data).toEqual([
      expect.objectContaining({
        id: response.transaction?.id,
        status: "confirmed",
        txHash: response.receipt?.txHash,
      }),
    ]);
    expect(await usdcOn(wallet, "base-sepolia")).toBe(before.payer - PRICE);
    expect(await usdcOn(payee, "base-sepolia")).toBe(before.payee + PRICE);
    // The facilitator settled exactly that transaction.
    expect(facilitator.settlements.map((s) => s.transaction)).toContain(response.receipt?.txHash);
  });

  it("pays a v2 resource on Solana the same way", async () => {
    const wallet = await fundedWallet();
    const before = {
      payer: await usdcOn(wallet, "solana-devnet"),
      payee: await usdcOn(payee, "solana-devnet"),
    };

    const response = await wallet.fetch(`${resources.url}/weather/solana`);

    expect(response.status).toBe(200);
    expect(await response.json()).toEqual(WEATHER);
    expect(response.transaction).toMatchObject({ type: "x402", status: "confirmed", chain: "solana-devnet" });
    expect(response.transaction?.txHash).toBe(response.receipt?.txHash);
    expect(await usdcOn(wallet, "solana-devnet")).toBe(before.payer - PRICE);
    expect(await usdcOn(payee, "solana-devnet")).toBe(before.payee + PRICE);
  });

  it("a resource that asks nothing comes back as it is, with no payment", async () => {
    const wallet = await fundedWallet();
    const response = await wallet.fetch(`${resources.url}/free`);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ free: true });
    expect(response.receipt).toBeUndefined();
    expect(response.transaction).toBeUndefined();
    expect((await wallet.transactions({ type: "x402" })).total).toBe(0);
  });

  it("a 402 to the payment throws SvcPaymentRejectedError naming the server's reason; nothing moved, and the payment stays pending until it can no longer settle", async () => {
    const wallet = await fundedWallet();
    const before = await usdcOn(wallet, "base-sepolia");

    const error = await wallet.fetch(`${refusingUrl}/weather`).catch((e) => e);

    expect(error).toBeInstanceOf(SvcPaymentRejectedError);
    expect(error.serverReason).toBe("invalid_exact_evm_payload_signature");
    expect(error.message).toContain("invalid_exact_evm_payload_signature");
    // The server still holds a valid signed payment: the record waits for the chain, not for the server's word.
    expect(error.transaction).toMatchObject({ type: "x402", status: "pending" });
    expect(error.transaction.failureReason).toContain("invalid_exact_evm_payload_signature");
    expect((await wallet.transactions({ type: "x402" })).data).toEqual([
      expect.objectContaining({ id: error.transaction.id, status: "pending" }),
    ]);
    expect(await usdcOn(wallet, "base-sepolia")).toBe(before);
  });
});

describe("wallet.fetch with the gate (spec 4.8.2)", () => {
  it("a denial throws SvcSpendDeniedError: nothing is signed, recorded, or settled", async () => {
    const wallet = await fundedWallet();
    const { calls, fetch } = countingFetch();
    const svc = client({ authz: authz({ perCallCap: "1000" }), fetch });
    const gated = await svc.wallet.get(wallet.id);
    const settlementsBefore = facilitator.settlements.length;

    const error = await gated.fetch(`${resources.url}/weather/evm`).catch((e) => e);

    expect(error).toBeInstanceOf(SvcSpendDeniedError);
    expect(decided().find((row) => row.decision_id === error.decisionId)).toMatchObject({
      approved: false,
      network: "eip155:84532",
      asset: devnet.evm.usdc,
      amount: String(PRICE),
      destination: payee.evm?.address,
      per_call_cap: "1000",
    });
    expect(calls).toContain("POST /v1/x402/fetch (probe)");
    expect(calls).not.toContain("POST /v1/x402/fetch");
    expect((await wallet.transactions({ type: "x402" })).total).toBe(0);
    expect(facilitator.settlements.length).toBe(settlementsBefore);
  });

  it("an approval pays exactly the authorized payment, and the daemon's settle facts equal its authorize facts", async () => {
    const wallet = await fundedWallet({ maxPerTx: "1" });
    const svc = client({ authz: authz() });
    const gated = await svc.wallet.get(wallet.id);
    const before = await usdcOn(wallet, "base-sepolia");

    const response = await gated.fetch(`${resources.url}/weather/evm`);

    expect(response.status).toBe(200);
    expect(await response.json()).toEqual(WEATHER);
    const decisionId = response.transaction?.spendDecisionId as string;
    expect(decisionId).toMatch(/^dec_/);
    expect(response.transaction).toMatchObject({ type: "x402", status: "confirmed" });
    const authorize = decided().find((row) => row.decision_id === decisionId);
    expect(authorize).toMatchObject({
      approved: true,
      network: "eip155:84532",
      asset: devnet.evm.usdc,
      amount: String(PRICE),
      destination: payee.evm?.address,
      credits: 1,
      // The cap is the policy's maxPerTx (1 USD) in atomic USDC.
      per_call_cap: "1000000",
    });
    const settle = settledRows().find((row) => row.decision_id === decisionId);
    for (const field of ["provider", "network", "asset", "amount", "credits"]) {
      expect(settle?.[field], field).toEqual(authorize?.[field]);
    }
    expect(settle?.tx_sig).toBe(response.receipt?.txHash);
    expect(await usdcOn(wallet, "base-sepolia")).toBe(before - PRICE);
  });

  it("on Solana: authorized for the devnet mint and the payee's address, paid, settled with the payment's signature", async () => {
    const wallet = await fundedWallet();
    const svc = client({ authz: authz() });
    const gated = await svc.wallet.get(wallet.id);
    const before = await usdcOn(wallet, "solana-devnet");

    const response = await gated.fetch(`${resources.url}/weather/solana`);

    expect(response.status).toBe(200);
    expect(response.transaction).toMatchObject({ type: "x402", status: "confirmed", chain: "solana-devnet" });
    const decisionId = response.transaction?.spendDecisionId as string;
    expect(decided().find((row) => row.decision_id === decisionId)).toMatchObject({
      approved: true,
      network: SOLANA_DEVNET_NETWORK,
      asset: devnet.solana.usdcMint,
      amount: String(PRICE),
      destination: payee.solana?.address,
    });
    expect(settledRows().find((row) => row.decision_id === decisionId)?.tx_sig).toBe(
      response.transaction?.txHash,
    );
    expect(await usdcOn(wallet, "solana-devnet")).toBe(before - PRICE);
  });

  it("a v1 server (x402-express 1.2, challenge in the body, network by v1 name) is authorized and paid the same way", async () => {
    const wallet = await fundedWallet();
    const svc = client({ authz: authz() });
    const gated = await svc.wallet.get(wallet.id);
    const before = await usdcOn(payee, "base-sepolia");

    const response = await gated.fetch(`${resourcesV1.url}/weather/evm`);

    expect(response.status).toBe(200);
    expect(await response.json()).toEqual(WEATHER);
    expect(response.transaction).toMatchObject({ type: "x402", status: "confirmed", chain: "base-sepolia" });
    const decisionId = response.transaction?.spendDecisionId as string;
    expect(decided().find((row) => row.decision_id === decisionId)).toMatchObject({
      approved: true,
      network: "eip155:84532",
      amount: String(PRICE),
      destination: payee.evm?.address,
    });
    expect(settledRows().find((row) => row.decision_id === decisionId)?.tx_sig).toBe(
      response.transaction?.txHash,
    );
    expect(await usdcOn(payee, "base-sepolia")).toBe(before + PRICE);
  });

  it("a payment the service refuses after approval (payee and host not on the whitelist) gives the approval back: nothing signed, the credits return", async () => {
    const wallet = await fundedWallet({ maxPerTx: "100", whitelist: ["api.example.com"] });
    const { calls, fetch } = countingFetch();
    const svc = client({ authz: authz(), fetch });
    const gated = await svc.wallet.get(wallet.id);
    const reserved = async () =>
      (await daemon.call<{ reserved_credits: number }>("GET", "/budgets/agent", { token: agentToken })).body
        .reserved_credits;
    const reservedBefore = await reserved();
    const settlementsBefore = facilitator.settlements.length;

    const error = await gated.fetch(`${resources.url}/weather/evm`).catch((e) => e);

    expect(error).toBeInstanceOf(SvcPolicyViolationError);
    expect(error.reason).toBe("recipient_not_allowed");
    expect(calls.filter((call) => call.startsWith("POST "))).toEqual([
      "POST /v1/x402/fetch (probe)",
      "POST /spend/authorize",
      "POST /v1/x402/fetch",
      "POST /spend/cancel",
    ]);
    expect(await reserved()).toBe(reservedBefore);
    expect((await wallet.transactions({ type: "x402" })).total).toBe(0);
    expect(facilitator.settlements.length).toBe(settlementsBefore);
  });

  it("a URL that does not answer 402 is returned untouched and nothing is authorized", async () => {
    const wallet = await fundedWallet();
    const { calls, fetch } = countingFetch();
    const svc = client({ authz: authz(), fetch });
    const gated = await svc.wallet.get(wallet.id);
    const decisionsBefore = decided().length;
    calls.length = 0;

    const response = await gated.fetch(`${resources.url}/free`);

    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ free: true });
    expect(response.receipt).toBeUndefined();
    expect(calls).toEqual(["POST /v1/x402/fetch (probe)"]);
    expect(decided().length).toBe(decisionsBefore);
    expect((await wallet.transactions({ type: "x402" })).total).toBe(0);
  });

  it("the probe reaches only what a paid request may: the service's own chain node is refused, nothing authorized", async () => {
    const wallet = await fundedWallet();
    const { calls, fetch } = countingFetch();
    const svc = client({ authz: authz(), fetch });
    const gated = await svc.wallet.get(wallet.id);
    const decisionsBefore = decided().length;
    calls.length = 0;

    // Reached, the node would let its caller send from any address it names.
    const error = await gated
      .fetch(devnet.evm.rpcUrl, {
        method: "POST",
        body: { jsonrpc: "2.0", id: 1, method: "anvil_impersonateAccount", params: [wallet.evm?.address] },
      })
      .catch((e) => e);

    expect(error).toBeInstanceOf(SvcValidationError);
    expect(error.reason).toBe("destination_not_allowed");
    expect(calls).toEqual(["POST /v1/x402/fetch (probe)"]);
    expect(decided().length).toBe(decisionsBefore);
  });
});

describe("svc.x402.discover", () => {
  it("lists the resources the facilitator's discovery lists, filtered by query", async () => {
    const url = `${resources.url}/weather/evm`;
    facilitator.listResource({
      resource: url,
      x402Version: 2,
      accepts: [{ scheme: "exact", network: "eip155:84532", amount: String(PRICE), asset: devnet.evm.usdc }],
      description: "Weather in Lisbon, paid on EVM",
      tags: ["weather"],
    });
    const found = await admin.x402.discover({ query: "lisbon" });
    expect(found).toEqual([
      expect.objectContaining({
        resource: url,
        x402Version: 2,
        description: "Weather in Lisbon, paid on EVM",
      }),
    ]);
    expect(await admin.x402.discover({ query: "no-such-thing" })).toEqual([]);
    // What discovery found is what wallet.fetch pays.
    const wallet = await fundedWallet();
    expect((await wallet.fetch(found[0]?.resource as string)).status).toBe(200);
  });
});
