import { fundEvm, fundSolana, IDLE_BLOCK_SECONDS } from "@svc/devnet";
import { parseUnits } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ChainClient } from "../src/chains/types.ts";
import { admitSpend } from "../src/spends/admission.ts";
import { findToken } from "../src/spends/transfer.ts";
import { devnetClients, solanaKey } from "./support/chains.ts";
import { eventually } from "./support/eventually.ts";
import { openStoredKey } from "./support/keys.ts";
import { RpcGate } from "./support/rpc-gate.ts";
import { waitForSettled } from "./support/spends.ts";
import {
  type ApiResponse,
  createTestServer,
  evmThroughGate,
  expectErrorShape,
  STORE_KIND,
  seedAccount,
  sharedDevnet,
  type TestServer,
} from "./support/test-server.ts";

const USDC = 1_000_000n;
let server: TestServer;
let apiKey: string;
let base: ChainClient;
let devnet: Awaited<ReturnType<typeof sharedDevnet>>;

beforeAll(async () => {
  devnet = await sharedDevnet();
  server = await createTestServer();
  ({ apiKey } = await seedAccount(server.api));
  ({ base } = await devnetClients(devnet));
});
afterAll(() => server.close());

const usdc = () => base.config.tokens.find((t) => t.symbol === "USDC") ?? base.config.nativeToken;

/** A fresh address to receive into, so its balance counts only this test's transfers. */
function freshRecipient(): `0x${string}` {
  return `0x${Array.from({ length: 40 }, () => "0123456789abcdef"[Math.floor(Math.random() * 16)]).join("")}` as `0x${string}`;
}

async function fundedWallet(policy: Record<string, unknown>) {
  const wallet = (await server.api.post("/v1/wallets", { name: "burst", chains: ["base"], policy }, apiKey))
    .body;
  await fundEvm(devnet, wallet.evm.address, { eth: 10n ** 18n, usdc: 500n * USDC });
  return wallet as { id: string; evm: { address: string } };
}

async function burstAgainstDailyLimit(servers: TestServer[]) {
  const wallet = await fundedWallet({ dailyLimit: "50" });
  const to = freshRecipient();
  const responses = await Promise.all(
    Array.from({ length: 100 }, (_, i) =>
      (servers[i % servers.length] as TestServer).api.post(
        `/v1/wallets/${wallet.id}/send`,
        { to, amount: "1", chain: "base" },
        apiKey,
      ),
    ),
  );
  const admitted = responses.filter((r) => r.status === 201);
  const refused = responses.filter((r) => r.status === 403);
  expect(admitted).toHaveLength(50);
  expect(refused).toHaveLength(50);
  for (const r of refused) {
    const error = expectErrorShape(r);
    expect(error.reason).toBe("daily_limit");
    expect(error.message).toBe(
      "Daily limit of $50.00 exceeded: $50.00 used in the last 24h, this spend is $1.00",
    );
    expect(error.details).toMatchObject({
      rule: "dailyLimit",
      limit: "50.00",
      used: "50.00",
      requested: "1.00",
      remaining: "0.00",
    });
  }
  const settled = await Promise.all(admitted.map((r) => waitForSettled(server.api, apiKey, r.body.id)));
  expect(settled.every((t) => t.status === "confirmed")).toBe(true);
  // The chain and the ledger agree: 50 transfers of 1 USDC, each recorded once.
  expect(await base.getBalance(to, usdc())).toBe(50n * USDC);
  const history = await server.api.get(`/v1/wallets/${wallet.id}/transactions?type=send&limit=100`, apiKey);
  expect(history.body.total).toBe(50);
  expect(new Set(history.body.data.map((t: { txHash: string }) => t.txHash)).size).toBe(50);
}

describe("the daily limit under concurrency", () => {
  it(`admits exactly 50 of 100 simultaneous $1 sends against dailyLimit 50 (${STORE_KIND})`, async () => {
    await burstAgainstDailyLimit([server]);
  });

  it.runIf(STORE_KIND === "postgres")(
    "admits exactly 50 of 100 with two instances on one PostgreSQL",
    async () => {
      const second = await createTestServer({ store: server.storeLocation });
      try {
        await burstAgainstDailyLimit([server, second]);
      } finally {
        await second.service.close();
      }
    },
  );

  it("refuses any further spend once the window is used up, however small", async () => {
    const wallet = await fundedWallet({ dailyLimit: "5" });
    const to = freshRecipient();
    const first = await server.api.post(
      `/v1/wallets/${wallet.id}/send`,
      { to, amount: "5", chain: "base" },
      apiKey,
    );
    expect(first.status).toBe(201);
    await waitForSettled(server.api, apiKey, first.body.id);
    const over = await server.api.post(
      `/v1/wallets/${wallet.id}/send`,
      { to, amount: "0.01", chain: "base" },
      apiKey,
    );
    expect(expectErrorShape(over).reason).toBe("daily_limit");
  });
});

describe("Idempotency-Key", () => {
  it("makes one transfer for 20 simultaneous requests with one key, and replays the same body afterwards", async () => {
    const wallet = await fundedWallet({});
    const to = freshRecipient();
    const body = { to, amount: "3", chain: "base" };
    const headers = { "idempotency-key": "order-42" };
    const responses = await Promise.all(
      Array.from({ length: 20 }, () =>
        server.api.post(`/v1/wallets/${wallet.id}/send`, body, apiKey, headers),
      ),
    );
    const created = responses.filter((r) => r.status === 201);
    expect(created.length).toBeGreaterThanOrEqual(1);
    for (const r of responses.filter((r) => r.status !== 201)) {
      expect(r.status).toBe(409);
      expect(expectErrorShape(r).reason).toBe("idempotency_key_in_use");
    }
    const ids = new Set(created.map((r) => r.body.id));
    expect(ids.size).toBe(1);
    const first = created[0]?.body;
    await waitForSettled(server.api, apiKey, first.id);

    const replay = await server.api.post(`/v1/wallets/${wallet.id}/send`, body, apiKey, headers);
    expect(replay.status).toBe(201);
    expect(replay.body).toEqual(first);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(await base.getBalance(to, usdc())).toBe(3n * USDC);
    const history = await server.api.get(`/v1/wallets/${wallet.id}/transactions?type=send`, apiKey);
    expect(history.body.total).toBe(1);
  });

  it("refuses the same key with another body with 409 idempotency_key_reused", async () => {
    const wallet = await fundedWallet({});
    const to = freshRecipient();
    const headers = { "idempotency-key": "order-43" };
    expect(
      (
        await server.api.post(
          `/v1/wallets/${wallet.id}/send`,
          { to, amount: "1", chain: "base" },
          apiKey,
          headers,
        )
      ).status,
    ).toBe(201);
    const other = await server.api.post(
      `/v1/wallets/${wallet.id}/send`,
      { to, amount: "2", chain: "base" },
      apiKey,
      headers,
    );
    expect(other.status).toBe(409);
    expect(expectErrorShape(other).reason).toBe("idempotency_key_reused");
  });
});

describe("EVM nonces", () => {
  it("gives 30 concurrent sends from one wallet consecutive nonces that all confirm", async () => {
    const wallet = await fundedWallet({});
    const to = freshRecipient();
    const responses = await Promise.all(
      Array.from({ length: 30 }, () =>
        server.api.post(`/v1/wallets/${wallet.id}/send`, { to, amount: "0.5", chain: "base" }, apiKey),
      ),
    );
    expect(responses.map((r) => r.status)).toEqual(Array(30).fill(201));
    const settled = await Promise.all(responses.map((r) => waitForSettled(server.api, apiKey, r.body.id)));
    expect(settled.every((t) => t.status === "confirmed")).toBe(true);
    expect(await base.getBalance(to, usdc())).toBe(15n * USDC);
  });
});

describe("Solana transfers, which have no nonce", () => {
  it("are each their own transaction: one signed alike by another instance first is signed again, not recorded twice", async () => {
    // Two identical transfers signed against one blockhash are one transaction: each process signs each of its
    // own differently, but another instance on the same store may have signed this very one first.
    const created = (await server.api.post("/v1/wallets", { name: "sol twin", chains: ["solana"] }, apiKey))
      .body;
    await fundSolana(devnet, created.solana.address, { sol: 10n ** 9n, usdc: 10n * USDC });
    const { solana } = await devnetClients(devnet);
    const token = findToken(solana, "USDC");
    const recipient = (await solanaKey()).address;
    await fundSolana(devnet, recipient, { usdc: 1n });
    const spend = {
      walletId: created.id as string,
      type: "send" as const,
      chain: "solana",
      token,
      amount: USDC,
      from: created.solana.address as string,
      to: recipient,
      usdMicros: USDC,
    };
    const privateKey = await openStoredKey(server.service, created.id, "solana");
    const plan = await solana.planTransfer({ from: spend.from, to: recipient, token, amount: USDC });
    const twin = await solana.signTransfer(plan, privateKey);
    const db = server.service.store.db;
    const first = await admitSpend(db, spend, { sign: async () => twin });
    let signings = 0;
    const second = await admitSpend(db, spend, {
      sign: async () => (signings++ === 0 ? twin : solana.signTransfer(plan, privateKey)),
    });
    privateKey.fill(0);
    expect(first.txHash).toBe(twin.txHash);
    expect(signings).toBe(2);
    expect(second.txHash).not.toBe(twin.txHash);
  });
});

describe("funds under concurrency", () => {
  let gate: RpcGate;
  let gated: TestServer;
  let gatedKey: string;
  beforeAll(async () => {
    gate = await RpcGate.start(devnet.evm.rpcUrl);
    gated = await createTestServer({ env: await evmThroughGate(gate) });
    ({ apiKey: gatedKey } = await seedAccount(gated.api));
  });
  afterAll(async () => {
    await gated?.close();
    await gate?.close();
  });

  /**
   * `count` simultaneous sends of 1 USDC from a wallet funded with `funds`, whose broadcasts wait at a gate
   * until every request has been decided: each plans against the funds as first given (nothing of the others
   * on chain yet). Returns the answers, and the wallet's sends once settled.
   */
  async function burstWhileBroadcastsWait(count: number, funds: { eth: bigint; usdc: bigint }) {
    const wallet = (await gated.api.post("/v1/wallets", { name: "burst", chains: ["base"] }, gatedKey)).body;
    await fundEvm(devnet, wallet.evm.address, funds);
    const to = freshRecipient();
    gate.decide = ({ methods }) => (methods.includes("eth_sendRawTransaction") ? "hold" : "forward");
    let answered = 0;
    const answers = Promise.all(
      Array.from({ length: count }, () =>
        gated.api
          .post(`/v1/wallets/${wallet.id}/send`, { to, amount: "1", chain: "base" }, gatedKey)
          .finally(() => answered++),
      ),
    );
    await eventually(async () => gate.held.length + answered === count);
    gate.decide = () => "forward";
    for (const held of gate.held.splice(0)) held.release();
    const responses = await answers;
    const admitted = responses.filter((r) => r.status === 201);
    const settled = await Promise.all(admitted.map((r) => waitForSettled(gated.api, gatedKey, r.body.id)));
    return { responses, admitted, settled, to };
  }

  it("admits only what the wallet holds of 12 simultaneous sends: the others 422 before signing, none reverts on chain", async () => {
    const { responses, admitted, settled, to } = await burstWhileBroadcastsWait(12, {
      eth: 10n ** 18n,
      usdc: 5n * USDC,
    });
    // Before, all 12 were admitted, and 7 reverted on chain, each paying gas.
    expect(admitted).toHaveLength(5);
    for (const r of responses.filter((r) => r.status !== 201)) {
      expect(r.status, r.text).toBe(422);
      expect(expectErrorShape(r)).toMatchObject({
        reason: "insufficient_token",
        message: expect.stringMatching(/5 sends not yet on chain/),
      });
    }
    expect(settled.map((t) => t.status)).toEqual(Array(5).fill("confirmed"));
    expect(await base.getBalance(to, usdc())).toBe(5n * USDC);
  });

  it("counts a send still waiting in the mempool: a second send of 3 from 5 USDC is refused while the first is unmined", async () => {
    const rpc = (method: string, params: unknown[]) =>
      fetch(devnet.evm.rpcUrl, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
      });
    const wallet = (await server.api.post("/v1/wallets", { name: "mempool", chains: ["base"] }, apiKey)).body;
    await fundEvm(devnet, wallet.evm.address, { eth: 10n ** 18n, usdc: 5n * USDC });
    // As on a real chain: a sent transaction waits for the next block.
    await rpc("evm_setIntervalMining", [0]);
    await rpc("evm_setAutomine", [false]);
    try {
      const to = freshRecipient();
      const first = await server.api.post(
        `/v1/wallets/${wallet.id}/send`,
        { to, amount: "3", chain: "base" },
        apiKey,
      );
      expect(first.status, first.text).toBe(201);
      const second = await server.api.post(
        `/v1/wallets/${wallet.id}/send`,
        { to, amount: "3", chain: "base" },
        apiKey,
      );
      // Before, it was admitted against the latest block's 5 USDC, and reverted once mined, paying gas.
      expect(second.status, second.text).toBe(422);
      expect(expectErrorShape(second).message).toMatch(/3 is taken by 1 send not yet on chain/);
    } finally {
      await rpc("evm_setAutomine", [true]);
      await rpc("evm_setIntervalMining", [IDLE_BLOCK_SECONDS]);
    }
  });

  it("counts a send mined and confirmed after another's balances were read: the second of two sends of 3 from 5 USDC is refused", async () => {
    // A burst split across instances (each confirmer settling what the others sent) admitted 28 sends of 1
    // USDC from 10: a request reads the balances, then waits its turn at the wallet's lock, and meanwhile the
    // sends before it are mined and confirmed; they were in neither its balances nor, confirmed, in flight.
    const wallet = (await gated.api.post("/v1/wallets", { name: "read early", chains: ["base"] }, gatedKey))
      .body;
    await fundEvm(devnet, wallet.evm.address, { eth: 10n ** 18n, usdc: 5n * USDC });
    const to = freshRecipient();
    const sendThree = () =>
      gated.api.post(`/v1/wallets/${wallet.id}/send`, { to, amount: "3", chain: "base" }, gatedKey);
    try {
      // The first send is recorded pending; its broadcast waits at the gate.
      gate.decide = ({ methods }) => (methods.includes("eth_sendRawTransaction") ? "hold" : "forward");
      const first = sendThree();
      await eventually(() => gate.held.length === 1, { describe: "the first send's broadcast" });
      const broadcast = gate.held.splice(0)[0];
      // The second reads its balances (5 USDC, the first not yet on chain); its answer waits here.
      gate.decide = ({ methods }) => (methods.includes("eth_estimateGas") ? "hold" : "forward");
      const second = sendThree();
      await eventually(() => gate.held.length === 1, { describe: "the second send's reads" });
      const reads = gate.held.splice(0)[0];
      const answer = (await reads?.askNode()) ?? "";
      gate.decide = () => "forward";
      // Then the first is mined, and the confirmer records it confirmed.
      broadcast?.release();
      const sent = await first;
      expect(sent.status, sent.text).toBe(201);
      expect((await waitForSettled(gated.api, gatedKey, sent.body.id)).status).toBe("confirmed");
      // Now the second goes on with what it read.
      reads?.answer(answer);
      const refused = await second;
      expect(refused.status, refused.text).toBe(422);
      expect(expectErrorShape(refused)).toMatchObject({
        reason: "insufficient_token",
        message: expect.stringMatching(/3 is taken by 1 send not yet on chain/),
      });
      expect(await base.getBalance(to, usdc())).toBe(3n * USDC);
    } finally {
      gate.openUp();
    }
  });

  it("counts the fees of sends not yet on chain: ETH for 3 sends' gas admits 3 of 8", async () => {
    // One transfer's fee cap (gas limit × max fee) as the service plans it, from a refusal that names it.
    const probe = (await gated.api.post("/v1/wallets", { name: "probe", chains: ["base"] }, gatedKey)).body;
    await fundEvm(devnet, probe.evm.address, { eth: 0n, usdc: 10n * USDC });
    const refused = await gated.api.post(
      `/v1/wallets/${probe.id}/send`,
      { to: freshRecipient(), amount: "1", chain: "base" },
      gatedKey,
    );
    expect(expectErrorShape(refused).reason).toBe("insufficient_gas");
    const feeCap = parseUnits(String(expectErrorShape(refused).details?.required), 18);
    const { responses, admitted, settled } = await burstWhileBroadcastsWait(8, {
      eth: feeCap * 3n + feeCap / 2n,
      usdc: 10n * USDC,
    });
    expect(admitted).toHaveLength(3);
    for (const r of responses.filter((r) => r.status !== 201)) {
      expect(r.status, r.text).toBe(422);
      expect(expectErrorShape(r).reason).toBe("insufficient_gas");
    }
    expect(settled.map((t) => t.status)).toEqual(Array(3).fill("confirmed"));
  });

  it("approves only what the wallet holds of held spends approved at once: the other 422, still held", async () => {
    const wallet = (
      await gated.api.post(
        "/v1/wallets",
        { name: "held", chains: ["base"], policy: { approvalAbove: "1" } },
        gatedKey,
      )
    ).body;
    await fundEvm(devnet, wallet.evm.address, { eth: 10n ** 18n, usdc: 5n * USDC });
    const held = [];
    for (let i = 0; i < 2; i++) {
      const asked = await gated.api.post(
        `/v1/wallets/${wallet.id}/send`,
        { to: freshRecipient(), amount: "3", chain: "base" },
        gatedKey,
      );
      expect(asked.body.status, asked.text).toBe("pending_approval");
      held.push(asked.body.id as string);
    }
    gate.decide = ({ methods }) => (methods.includes("eth_sendRawTransaction") ? "hold" : "forward");
    let answered = 0;
    const answers = Promise.all(
      held.map((id) =>
        gated.api.post(`/v1/approvals/${id}/approve`, undefined, gatedKey).finally(() => answered++),
      ),
    );
    await eventually(async () => gate.held.length + answered === 2);
    gate.decide = () => "forward";
    for (const call of gate.held.splice(0)) call.release();
    const responses = await answers;
    expect(responses.map((r) => r.status).sort()).toEqual([200, 422]);
    const refused = responses.find((r) => r.status === 422);
    expect(expectErrorShape(refused as ApiResponse).reason).toBe("insufficient_token");
    const approved = responses.find((r) => r.status === 200);
    expect((await waitForSettled(gated.api, gatedKey, approved?.body.id)).status).toBe("confirmed");
    const stillHeld = held.find((id) => id !== approved?.body.id);
    expect((await gated.api.get(`/v1/transactions/${stillHeld}`, gatedKey)).body.status).toBe(
      "pending_approval",
    );
  });
});
