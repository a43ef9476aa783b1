/**
 * The funds check under a wallet's spend lock counts its EVM x402 payments not yet settled as it counts its
 * sends not yet mined, both ways: a send counts the payments in flight, a payment counts the sends and the
 * other payments in flight. A payment already settled whose row is still pending (the confirmer has not read
 * the chain since) is in the balance, and is not counted again.
 *
 * The resource here keeps every payment it is sent and refuses it (402 again): the payment stays pending,
 * unsettled, until the test has the devnet's facilitator settle it. The confirmer is left idle (one pass at
 * start), so a payment settled meanwhile stays pending until the test runs a pass.
 */
import { fundEvm, IDLE_BLOCK_SECONDS } from "@svc/devnet";
import { type LocalFacilitator, startLocalFacilitator } from "@svc/x402-local";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ChainClient } from "../src/chains/types.ts";
import { MAX_PAYMENT_STATE_READS } from "../src/spends/funds.ts";
import { devnetClients, evmKey } from "./support/chains.ts";
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
import { settleAtFacilitator, startPaymentKeeper } from "./support/x402.ts";

const USDC = 1_000_000n;
let devnet: Awaited<ReturnType<typeof sharedDevnet>>;
let facilitator: LocalFacilitator;
let keeper: Awaited<ReturnType<typeof startPaymentKeeper>>;
let server: TestServer;
let owner: Awaited<ReturnType<typeof seedAccount>>;
let base: ChainClient;
const payTo = evmKey().address;

/** x402's `exact` requirement of `amount` atomic units of the devnet's USDC, to {@link payTo}. */
function requirement(amount: bigint): Record<string, unknown> {
  return {
    scheme: "exact",
    network: `eip155:${devnet.evm.chainId}`,
    amount: String(amount),
    asset: devnet.evm.usdc,
    payTo,
    maxTimeoutSeconds: 600,
    extra: devnet.evm.usdcEip712,
  };
}

beforeAll(async () => {
  devnet = await sharedDevnet();
  facilitator = await startLocalFacilitator(devnet);
  ({ base } = await devnetClients(devnet));
  // GET /<amount>: asks that many atomic units of USDC, and keeps (refusing it) any payment it is sent.
  keeper = await startPaymentKeeper(requirement);
  server = await createTestServer({
    env: { SVC_OUTBOUND_ALLOW: "127.0.0.0/8", SVC_CONFIRMER_INTERVAL_MS: "3600000" },
  });
  owner = await seedAccount(server.api);
});

afterAll(async () => {
  await server?.close();
  await keeper?.close();
  await facilitator?.stop();
});

const usdc = () => base.config.tokens.find((t) => t.symbol === "USDC") ?? base.config.nativeToken;

/** A service the test talks to, and its owner's API key. */
interface Service {
  server: TestServer;
  apiKey: string;
}
const main = (): Service => ({ server, apiKey: owner.apiKey });

async function fundedWallet(funds: { eth?: bigint; usdc: bigint }, on = main()) {
  const created = await on.server.api.post("/v1/wallets", { name: "payer", chains: ["base"] }, on.apiKey);
  expect(created.status, created.text).toBe(201);
  const wallet = created.body as { id: string; evm: { address: `0x${string}` } };
  await fundEvm(devnet, wallet.evm.address, funds);
  return wallet;
}

/** Pays the keeper `amount` (whole USDC) from the wallet. */
function pay(walletId: string, amount: bigint, on = main()) {
  return on.server.api.post("/v1/x402/fetch", { walletId, url: `${keeper.url}/${amount * USDC}` }, on.apiKey);
}

/** A payment the keeper kept: answered with its 402, recorded pending. Returns its transaction id. */
async function keptPayment(walletId: string, amount: bigint, on = main()): Promise<string> {
  const response = await pay(walletId, amount, on);
  expect(response.status, response.text).toBe(200);
  expect(response.body).toMatchObject({ status: 402, transaction: { type: "x402", status: "pending" } });
  return response.body.transactionId as string;
}

function send(walletId: string, amount: string, on = main()) {
  return on.server.api.post(
    `/v1/wallets/${walletId}/send`,
    { to: evmKey().address, amount, chain: "base" },
    on.apiKey,
  );
}

async function x402Rows(walletId: string) {
  const response = await server.api.get(`/v1/wallets/${walletId}/transactions?type=x402`, owner.apiKey);
  return response.body.data as { id: string; status: string }[];
}

/** Has the facilitator settle the last payment the keeper kept on chain, as the resource could at any time. */
async function settleLastKept(): Promise<void> {
  const last = keeper.kept.at(-1);
  if (!last) throw new Error("no payment kept");
  const settled = await settleAtFacilitator(facilitator.url, last.payload, last.requirement);
  expect(settled.success).toBe(true);
}

async function withMiningStopped(body: () => Promise<void>): Promise<void> {
  const rpc = (method: string, params: unknown[]) =>
    fetch(devnet.evm.rpcUrl, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
    });
  // As on a real chain: a sent transaction waits for the next block.
  await rpc("evm_setIntervalMining", [0]);
  await rpc("evm_setAutomine", [false]);
  try {
    await body();
  } finally {
    await rpc("evm_setAutomine", [true]);
    await rpc("evm_setIntervalMining", [IDLE_BLOCK_SECONDS]);
  }
}

describe("the funds check counts x402 payments in flight", () => {
  it("a send counts a payment not yet settled: 3 USDC from 5 while 4 are promised to a resource is refused", async () => {
    const wallet = await fundedWallet({ eth: 10n ** 18n, usdc: 5n * USDC });
    await keptPayment(wallet.id, 4n);
    const refused = await send(wallet.id, "3");
    // Before, it was admitted against the 5 USDC on chain: whichever of the two landed second failed.
    expect(refused.status, refused.text).toBe(422);
    expect(expectErrorShape(refused)).toMatchObject({
      reason: "insufficient_token",
      message:
        "Insufficient USDC: balance 5, of which 4 is taken by 1 x402 payment not yet on chain; this send needs 3",
    });
    expect((await send(wallet.id, "1")).status).toBe(201);
  });

  it("a payment counts another not yet settled: a second 4 USDC from 5 is refused, nothing signed", async () => {
    const wallet = await fundedWallet({ usdc: 5n * USDC });
    const first = await keptPayment(wallet.id, 4n);
    const keptBefore = keeper.kept.length;
    const refused = await pay(wallet.id, 4n);
    // Before, both were signed and recorded, each checked against the whole balance.
    expect(refused.status, refused.text).toBe(422);
    expect(expectErrorShape(refused)).toMatchObject({
      reason: "insufficient_token",
      message:
        "Insufficient USDC: balance 5, of which 4 is taken by 1 x402 payment not yet on chain; this payment needs 4",
    });
    expect(keeper.kept).toHaveLength(keptBefore);
    expect((await x402Rows(wallet.id)).map((row) => row.id)).toEqual([first]);
  });

  it("a payment counts a send not yet mined: 4 USDC from 5 while a send of 3 waits in the mempool is refused", async () => {
    const wallet = await fundedWallet({ eth: 10n ** 18n, usdc: 5n * USDC });
    await withMiningStopped(async () => {
      const sent = await send(wallet.id, "3");
      expect(sent.status, sent.text).toBe(201);
      const refused = await pay(wallet.id, 4n);
      // Before, it was admitted against the latest block's 5 USDC.
      expect(refused.status, refused.text).toBe(422);
      expect(expectErrorShape(refused)).toMatchObject({
        reason: "insufficient_token",
        message:
          "Insufficient USDC: balance 5, of which 3 is taken by 1 send not yet on chain; this payment needs 4",
      });
    });
    expect(await x402Rows(wallet.id)).toEqual([]);
  });

  it("a payment settled on chain whose row is still pending is in the balance, and is not counted again", async () => {
    const wallet = await fundedWallet({ eth: 10n ** 18n, usdc: 10n * USDC });
    const settledId = await keptPayment(wallet.id, 4n);
    await settleLastKept();
    expect(await base.getBalance(wallet.evm.address, usdc())).toBe(6n * USDC);
    // The confirmer has not read the chain since: the row is pending, and its 4 USDC are in the 6 read.
    expect((await server.api.get(`/v1/transactions/${settledId}`, owner.apiKey)).body.status).toBe("pending");
    const sent = await send(wallet.id, "5");
    expect(sent.status, sent.text).toBe(201);
    // The send is mined (its row pending too) and the payment settled: 1 USDC left, which a payment may take.
    const last = await pay(wallet.id, 1n);
    expect(last.status, last.text).toBe(200);
    expect(last.body.transaction).toMatchObject({ type: "x402", status: "pending" });
    // Once the confirmer reads the chain, both rows say what it shows.
    await eventually(async () => {
      await server.service.confirmer.runOnce();
      const statuses = await Promise.all(
        [settledId, sent.body.id].map(
          async (id) => (await server.api.get(`/v1/transactions/${id}`, owner.apiKey)).body.status,
        ),
      );
      return statuses.every((status) => status === "confirmed") || undefined;
    });
  });
});

describe("a payment not yet settled when the balances were read", () => {
  let gate: RpcGate;
  let gated: Service;
  beforeAll(async () => {
    gate = await RpcGate.start(devnet.evm.rpcUrl);
    const gatedServer = await createTestServer({
      env: {
        ...(await evmThroughGate(gate)),
        SVC_OUTBOUND_ALLOW: "127.0.0.0/8",
        SVC_CONFIRMER_INTERVAL_MS: "3600000",
      },
    });
    gated = { server: gatedServer, apiKey: (await seedAccount(gatedServer.api)).apiKey };
  });
  afterAll(async () => {
    await gated?.server.close();
    await gate?.close();
  });

  /**
   * Sends `amount` from the wallet on the gated service with its plan (the balances and the payments'
   * states) read from the node and held back while `meanwhile` runs: what it does falls between the read and
   * the check under the wallet's lock.
   */
  async function sendWithPlanHeld(walletId: string, amount: string, meanwhile: () => Promise<void>) {
    gate.decide = ({ methods }) => (methods.includes("eth_estimateGas") ? "hold" : "forward");
    const sending = send(walletId, amount, gated);
    const [held] = await eventually(async () => (gate.held.length > 0 ? gate.held : undefined));
    gate.decide = () => "forward";
    gate.held.splice(0);
    if (!held) throw new Error("no plan held");
    const answer = await held.askNode();
    await meanwhile();
    held.answer(answer);
    return sending;
  }

  /** Settles the last payment kept unsettled, and waits for the gated service to record `paymentId` confirmed. */
  async function settleAndConfirm(paymentId: string): Promise<void> {
    await settleLastKept();
    await eventually(async () => {
      await gated.server.service.confirmer.runOnce();
      const row = await gated.server.api.get(`/v1/transactions/${paymentId}`, gated.apiKey);
      return row.body.status === "confirmed" || undefined;
    });
  }

  it("counts, confirmed before the lock, since it settled after the read: a send of 3 from 5 is refused", async () => {
    const wallet = await fundedWallet({ eth: 10n ** 18n, usdc: 5n * USDC }, gated);
    const paymentId = await keptPayment(wallet.id, 4n, gated);
    // The send's plan (its balances, and the payment's state) is read from the node, then held back while
    // the payment settles and the confirmer records it: no longer pending when the send is checked.
    const refused = await sendWithPlanHeld(wallet.id, "3", () => settleAndConfirm(paymentId));
    // Counting only pending payments, it was admitted against the 5 read, and reverted on chain.
    expect(refused.status, refused.text).toBe(422);
    expect(expectErrorShape(refused)).toMatchObject({
      reason: "insufficient_token",
      message:
        "Insufficient USDC: balance 5, of which 4 is taken by 1 x402 payment not yet on chain; this send needs 3",
    });
  });

  it("counts one recorded after the read, settled and confirmed before the lock: a send of 3 from 5 is refused", async () => {
    const wallet = await fundedWallet({ eth: 10n ** 18n, usdc: 5n * USDC }, gated);
    // The send's plan (its balances: 5 USDC, no payment yet) is read from the node, then held back while a
    // payment of 4 is made (the send, not yet recorded, is not counted), settles, and is confirmed.
    const refused = await sendWithPlanHeld(wallet.id, "3", async () =>
      settleAndConfirm(await keptPayment(wallet.id, 4n, gated)),
    );
    // Counting only the payments read with the balances, or pending, it was admitted against the 5 read,
    // and reverted on chain.
    expect(refused.status, refused.text).toBe(422);
    expect(expectErrorShape(refused)).toMatchObject({
      reason: "insufficient_token",
      message:
        "Insufficient USDC: balance 5, of which 4 is taken by 1 x402 payment not yet on chain; this send needs 3",
    });
  });

  it("counts one recorded after the read by an instance whose clock is behind, settled and confirmed before the lock: a send of 3 from 5 is refused", async () => {
    const wallet = await fundedWallet({ eth: 10n ** 18n, usdc: 9n * USDC }, gated);
    // A payment of 4, settled and confirmed: the wallet's newest payment when the send reads its balances (5).
    await settleAndConfirm(await keptPayment(wallet.id, 4n, gated));
    // Held back while a payment of 4 is made by an instance whose clock is two minutes behind (this one's,
    // set back): dated before the first. It settles and is confirmed.
    const refused = await sendWithPlanHeld(wallet.id, "3", async () => {
      gated.server.clock.advance(-120_000);
      let paymentId: string;
      try {
        paymentId = await keptPayment(wallet.id, 4n, gated);
      } finally {
        gated.server.clock.reset();
      }
      await settleAndConfirm(paymentId);
    });
    expect(refused.status, refused.text).toBe(422);
    expect(expectErrorShape(refused)).toMatchObject({
      reason: "insufficient_token",
      message:
        "Insufficient USDC: balance 5, of which 4 is taken by 1 x402 payment not yet on chain; this send needs 3",
    });
  });

  it(`counts one pending beyond the ${MAX_PAYMENT_STATE_READS} whose states are read, settled and confirmed before the lock`, async () => {
    const wallet = await fundedWallet({ eth: 10n ** 18n, usdc: 20n * USDC }, gated);
    // As many payments of 1 as the read tells the states of, then one of 4 (the rest): all pending, unsettled.
    for (let i = 0; i < MAX_PAYMENT_STATE_READS; i++) await keptPayment(wallet.id, 1n, gated);
    const paymentId = await keptPayment(wallet.id, 4n, gated);
    // The send's plan (its balances: 20 USDC, the first payments' states) is read from the node, then held
    // back while the payment of 4 settles and the confirmer records it: no longer pending when the send is
    // checked.
    const refused = await sendWithPlanHeld(wallet.id, "3", () => settleAndConfirm(paymentId));
    // Its state not read, recorded before the newest payment at the read, and no longer pending, it was in
    // nothing counted: the send was admitted against 20 less the 16 pending, past what the wallet had promised.
    expect(refused.status, refused.text).toBe(422);
    expect(expectErrorShape(refused)).toMatchObject({
      reason: "insufficient_token",
      message: `Insufficient USDC: balance 20, of which 20 is taken by ${MAX_PAYMENT_STATE_READS + 1} x402 payments not yet on chain; this send needs 3`,
    });
  });
});
