import fs from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { fundSolana } from "@svc/devnet";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { eventually } from "../../../test/support/eventually.ts";
import {
  type AuthzSettlementFailureLog,
  type FailedSettlementRecord,
  logSettlementFailure,
  MemorySettlementStore,
  resetAuthzSettlementLogger,
  SpendAuthzClient,
  SpendGate,
  SvcAuthzError,
  SvcConnectionError,
  SvcPolicyViolationError,
  SvcSpendDeniedError,
  type SvcWallet,
  type SvcWalletOptions,
  setAuthzSettlementLogger,
  type Wallet,
} from "../src/index.ts";
import { FileSettlementStore } from "../src/node/index.ts";
import { FaultProxy } from "./proxy.ts";
import {
  auditRowsOf,
  fundedWallet,
  type GatedWorld,
  sharedDevnet,
  startGatedWorld,
  startTestDaemon,
} from "./support.ts";

let world: GatedWorld;
let payee: Wallet;
let usdcAddress: string;
let baseNetwork: string;

beforeAll(async () => {
  world = await startGatedWorld();
  payee = await world.admin.wallet.create({ name: "payee", chains: ["base", "solana"] });
  const base = (await world.admin.chains.list()).find((chain) => chain.name === "base");
  baseNetwork = base?.network as string;
  usdcAddress = base?.tokens.find((token) => token.symbol === "USDC")?.address as string;
});
afterAll(() => world.close());
afterEach(() => resetAuthzSettlementLogger());

/** A `fetch` that logs "METHOD path" of every request (service and daemon) and the JSON bodies of sends. */
function recordingFetch(onResponse?: (url: string, response: Response) => Promise<void>) {
  const calls: string[] = [];
  const sendBodies: Record<string, any>[] = [];
  const fetchFn = async (url: string, init: RequestInit): Promise<Response> => {
    calls.push(`${init.method ?? "GET"} ${new URL(url).pathname}`);
    if (url.endsWith("/send")) sendBodies.push(JSON.parse(String(init.body)));
    const response = await fetch(url, init);
    await onResponse?.(url, response);
    return response;
  };
  return { calls, sendBodies, fetch: fetchFn };
}

/** A gated client plus its wallet object for `walletId`. */
async function gated(
  walletId: string,
  options: SvcWalletOptions = {},
): Promise<{ svc: SvcWallet; wallet: Wallet }> {
  const svc = world.client({ authz: world.authz(), ...options });
  return { svc, wallet: await svc.wallet.get(walletId) };
}

const decided = () => auditRowsOf(world.daemon, "spend_authorization_decided");
const settled = () => auditRowsOf(world.daemon, "spend_settled");
const decisionRow = (decisionId: string) => decided().find((row) => row.decision_id === decisionId);
const sendCount = async (wallet: Wallet) => (await wallet.transactions({ type: "send" })).total;

describe("spec 4.8: gate behaviour rules", () => {
  it("4.8.1 with the gate on, wallet.send calls daemon authorize before submitting the spend", async () => {
    const payer = await fundedWallet(world.admin);
    const { calls, fetch } = recordingFetch();
    const { wallet } = await gated(payer.id, { fetch });
    calls.length = 0;
    await wallet.send({ to: payee.evm?.address as string, amount: 1, token: "USDC", chain: "base" });
    const sendPath = `/v1/wallets/${payer.id}/send`;
    expect(calls.filter((call) => call !== "GET /v1/chains" && !call.endsWith("/policy"))).toEqual([
      "POST /spend/authorize",
      `POST ${sendPath}`,
      "POST /spend/settle",
    ]);
  });

  it("4.8.3 on approval, the spend is submitted with spendAuthorization.decisionId (and 4.7: the result has spendDecisionId and txHash)", async () => {
    const payer = await fundedWallet(world.admin);
    const { sendBodies, fetch } = recordingFetch();
    const { wallet } = await gated(payer.id, { fetch });
    const tx = await wallet.send({
      to: payee.evm?.address as string,
      amount: 2,
      token: "USDC",
      chain: "base",
    });
    const decisionId = sendBodies[0]?.spendAuthorization?.decisionId as string;
    expect(decisionId).toMatch(/^dec_/);
    expect(decisionRow(decisionId)).toMatchObject({ approved: true });
    expect(tx.spendDecisionId).toBe(decisionId);
    expect(tx.txHash).toMatch(/^0x[0-9a-f]{64}$/);
    expect(await world.admin.transactions.get(tx.id)).toMatchObject({
      spendDecisionId: decisionId,
      txHash: tx.txHash,
    });
  });

  it("4.8.4 when the daemon denies, SvcSpendDeniedError is thrown and no transaction is submitted (none exists on the service)", async () => {
    const payer = await fundedWallet(world.admin);
    const { calls, fetch } = recordingFetch();
    const svc = world.client({ authz: world.authz({ perCallCap: "1000" }), fetch });
    const wallet = await svc.wallet.get(payer.id);
    const error = await wallet
      .send({ to: payee.evm?.address as string, amount: 5, token: "USDC", chain: "base" })
      .catch((e) => e);
    expect(error).toBeInstanceOf(SvcSpendDeniedError);
    expect(error.reason).toMatch(/exceeds per_call_cap/);
    expect(decisionRow(error.decisionId)).toMatchObject({
      approved: false,
      amount: "5000000",
      per_call_cap: "1000",
    });
    expect(calls.some((call) => call.endsWith("/send"))).toBe(false);
    expect(await sendCount(payer)).toBe(0);
  });

  it("4.8.5 a spendDecisionId passed to wallet.send skips the client's authorize call and is forwarded (and not settled by the client)", async () => {
    const payer = await fundedWallet(world.admin);
    const to = payee.evm?.address as string;
    const daemon = new SpendAuthzClient({ gatewayUrl: world.daemonUrl, token: world.agentToken });
    const verdict = await daemon.authorize({
      provider: "svc",
      network: baseNetwork,
      asset: usdcAddress,
      amount: "3000000",
      per_call_cap: "100000000",
      credits: 300,
      destination: to,
    });
    expect(verdict.approved).toBe(true);
    const { calls, sendBodies, fetch } = recordingFetch();
    const { wallet } = await gated(payer.id, { fetch });
    calls.length = 0;
    const tx = await wallet.send({
      to,
      amount: 3,
      token: "USDC",
      chain: "base",
      spendDecisionId: verdict.decisionId,
    });
    // Only the chain facts are read (for the amount's decimals); no daemon call, no settle.
    expect(calls.filter((call) => !call.startsWith("GET "))).toEqual([`POST /v1/wallets/${payer.id}/send`]);
    expect(sendBodies[0]?.spendAuthorization).toEqual({ decisionId: verdict.decisionId });
    expect(tx.spendDecisionId).toBe(verdict.decisionId);
    expect(settled().some((row) => row.decision_id === verdict.decisionId)).toBe(false);
  });

  it("4.8.6 after a successful broadcast the client settles with the same network, asset, amount and credits as authorize (read back from the audit rows)", async () => {
    const payer = await fundedWallet(world.admin);
    const { wallet } = await gated(payer.id);
    const tx = await wallet.send({
      to: payee.evm?.address as string,
      amount: "1.5",
      token: "USDC",
      chain: "base",
    });
    const decisionId = tx.spendDecisionId as string;
    const authorize = decisionRow(decisionId);
    const settle = settled().find((row) => row.decision_id === decisionId);
    expect(authorize).toMatchObject({
      provider: "svc",
      network: baseNetwork,
      asset: usdcAddress,
      amount: "1500000",
      credits: 150,
      destination: payee.evm?.address,
      approved: true,
    });
    expect(settle).toBeDefined();
    for (const field of ["provider", "network", "asset", "amount", "credits"]) {
      expect(settle?.[field], field).toEqual(authorize?.[field]);
    }
    expect(settle?.tx_sig).toBe(tx.txHash);
  });

  it("4.8.7 the per-call cap is perCallCap when set", async () => {
    const payer = await fundedWallet(world.admin, { maxPerTx: "100" });
    const svc = world.client({ authz: world.authz({ perCallCap: "7000000" }) });
    const wallet = await svc.wallet.get(payer.id);
    const tx = await wallet.send({
      to: payee.evm?.address as string,
      amount: 1,
      token: "USDC",
      chain: "base",
    });
    expect(decisionRow(tx.spendDecisionId as string)?.per_call_cap).toBe("7000000");
  });

  it("4.8.7 otherwise the cap is the wallet policy maxPerTx in the asset's atomic units, cached per wallet; a policy update invalidates it", async () => {
    const payer = await fundedWallet(world.admin, { maxPerTx: "10" });
    const { wallet } = await gated(payer.id);
    const to = payee.evm?.address as string;
    const capOf = (tx: { spendDecisionId?: string }) =>
      decisionRow(tx.spendDecisionId as string)?.per_call_cap;
    expect(capOf(await wallet.send({ to, amount: 1, token: "USDC", chain: "base" }))).toBe("10000000");
    // Native coin at the service's price: $10 / $3000 per ETH, rounded down to wei.
    expect(capOf(await wallet.send({ to, amount: "0.001", token: "ETH", chain: "base" }))).toBe(
      "3333333333333333",
    );
    // Changed elsewhere (another client): this client keeps its cached cap.
    await world.admin.wallet.get(payer.id).then((w) => w.policy.update({ maxPerTx: "20" }));
    expect(capOf(await wallet.send({ to, amount: 1, token: "USDC", chain: "base" }))).toBe("10000000");
    // Changed through this client: the cache is dropped and the next spend reads the new bound.
    await wallet.policy.update({ maxPerTx: "30" });
    expect(capOf(await wallet.send({ to, amount: 1, token: "USDC", chain: "base" }))).toBe("30000000");
  });

  it("4.8.8 when all settlement retries fail, the failure is logged once and stored; the payment result is unaffected; retryLatestFailedSettlement settles it once the daemon is back", async () => {
    const payer = await fundedWallet(world.admin);
    const logs: AuthzSettlementFailureLog[] = [];
    setAuthzSettlementLogger((log) => logs.push(log));
    let stopAfterSend = true;
    const { fetch } = recordingFetch(async (url, response) => {
      // The service has broadcast the spend: take the daemon away before the client settles.
      if (stopAfterSend && url.endsWith("/send") && response.status === 201) {
        stopAfterSend = false;
        await world.daemon.stop();
      }
    });
    const svc = world.client({
      fetch,
      authz: world.authz({ settlementRetryAttempts: 2, settlementRetryDelayMs: 10 }),
    });
    const wallet = await svc.wallet.get(payer.id);
    const tx = await wallet.send({
      to: payee.evm?.address as string,
      amount: 4,
      token: "USDC",
      chain: "base",
    });
    const decisionId = tx.spendDecisionId as string;

    expect(tx).toMatchObject({ type: "send", amount: "4", status: "pending" });
    expect(tx.txHash).toMatch(/^0x[0-9a-f]{64}$/);
    const onService = await world.admin.transactions.get(tx.id);
    expect(onService.txHash).toBe(tx.txHash);

    expect(logs).toHaveLength(1);
    expect(logs[0]).toEqual({
      decisionId,
      provider: "svc",
      network: baseNetwork,
      asset: usdcAddress,
      amount: "4000000",
      credits: 400,
      txHash: tx.txHash,
      error: expect.stringMatching(/unreachable/),
      attempts: 3,
    });
    const records = svc.authz?.listFailedSettlements() as FailedSettlementRecord[];
    expect(records).toHaveLength(1);
    expect(records[0]).toMatchObject({
      decisionId,
      txHash: tx.txHash,
      context: { provider: "svc", network: baseNetwork, asset: usdcAddress, amount: "4000000", credits: 400 },
      attempts: 3,
      lastError: expect.stringMatching(/unreachable/),
    });
    expect(Number.isNaN(Date.parse(records[0]?.failedAt as string))).toBe(false);

    // Still down: a retry fails, counts, and keeps the record.
    expect(await svc.authz?.retryLatestFailedSettlement()).toBe(false);
    expect(svc.authz?.listFailedSettlements()[0]?.attempts).toBe(4);

    await world.restartDaemon();
    expect(await svc.authz?.retryLatestFailedSettlement()).toBe(true);
    expect(svc.authz?.listFailedSettlements()).toEqual([]);
    const settle = settled().find((row) => row.decision_id === decisionId);
    expect(settle).toMatchObject({ amount: "4000000", credits: 400, tx_sig: tx.txHash });
    // No rebroadcast, no reauthorization: still one send, one verdict for this decision.
    expect(await sendCount(payer)).toBe(1);
    expect(decided().filter((row) => row.decision_id === decisionId)).toHaveLength(1);
  });

  it("4.8.9 the daemon's audit chain holds a spend_authorization_decided row for each verdict, approve and deny", async () => {
    const payer = await fundedWallet(world.admin, { maxPerTx: "5" });
    const { wallet } = await gated(payer.id);
    const before = decided().length;
    const tx = await wallet.send({
      to: payee.evm?.address as string,
      amount: 1,
      token: "USDC",
      chain: "base",
    });
    const denied = await wallet
      .send({ to: payee.evm?.address as string, amount: 6, token: "USDC", chain: "base" })
      .catch((e) => e);
    expect(denied).toBeInstanceOf(SvcSpendDeniedError);
    const rows = decided().slice(before);
    expect(rows.map((row) => [row.decision_id, row.approved])).toEqual([
      [tx.spendDecisionId, true],
      [denied.decisionId, false],
    ]);
  });
});

describe("a gated spend held for the owner's approval", () => {
  it("is settled with the daemon once approved and broadcast; a rejected one is never settled", async () => {
    const payer = await fundedWallet(world.admin, { maxPerTx: "100", approvalAbove: "5" });
    const { svc, wallet } = await gated(payer.id);
    const held = await wallet.send({
      to: payee.evm?.address as string,
      amount: 6,
      token: "USDC",
      chain: "base",
    });
    expect(held.status).toBe("pending_approval");
    const decisionId = held.spendDecisionId as string;
    expect(decisionRow(decisionId)).toMatchObject({ approved: true });
    // Nothing broadcast, nothing settled; the gate remembers it.
    expect(settled().map((row) => row.decision_id)).not.toContain(decisionId);
    expect(svc.authz?.listHeldSpends()).toEqual([{ transactionId: held.id, decisionId }]);

    await world.admin.approvals.approve(held.id);
    const done = await wallet.waitForTransaction(held.id, { timeoutMs: 60_000, intervalMs: 100 });
    expect(done.status).toBe("confirmed");
    expect(settled().filter((row) => row.decision_id === decisionId)).toHaveLength(1);
    expect(svc.authz?.listHeldSpends()).toEqual([]);
    expect(svc.authz?.listFailedSettlements()).toEqual([]);

    const refused = await wallet.send({
      to: payee.evm?.address as string,
      amount: 7,
      token: "USDC",
      chain: "base",
    });
    await world.admin.approvals.reject(refused.id);
    expect((await wallet.waitForTransaction(refused.id)).status).toBe("rejected");
    expect(settled().map((row) => row.decision_id)).not.toContain(refused.spendDecisionId);
    expect(svc.authz?.listHeldSpends()).toEqual([]);
  });
});

describe("spec 4.7: client library operations", () => {
  it("svc.wallet.get(walletId) gives a wallet object that sends through the gate", async () => {
    const payer = await fundedWallet(world.admin);
    const { wallet } = await gated(payer.id);
    expect(wallet.toJSON()).toEqual(payer.toJSON());
    expect(typeof wallet.send).toBe("function");
  });

  it("spec 2.11 defaults: provider svc, 3 settlement retries 100 ms apart, perCallCap from the policy", () => {
    const gate = world.client({ authz: world.authz() }).authz as SpendGate;
    expect(gate.provider).toBe("svc");
    expect(gate.settlementRetryAttempts).toBe(3);
    expect(gate.settlementRetryDelayMs).toBe(100);
    expect(gate.perCallCap).toBeUndefined();
  });

  it("svc.authz exists only when the client was constructed with an authz config", () => {
    expect("authz" in world.client()).toBe(false);
    expect(world.client().authz).toBeUndefined();
    expect(world.client({ authz: world.authz() }).authz).toBeInstanceOf(SpendGate);
  });

  it("svc.authz.listFailedSettlements() returns an array synchronously; the store belongs to the SvcWallet unless a shared one is passed", async () => {
    const payer = await fundedWallet(world.admin);
    setAuthzSettlementLogger(() => {});
    const shared = new MemorySettlementStore();
    // A daemon that is not there at settle time: its URL answers authorize through a wrapper only.
    const failing = world.client({
      authz: world.authz({ settlementRetryAttempts: 0, settlementStore: shared }),
      fetch: (url, init) =>
        url.endsWith("/spend/settle") ? Promise.reject(new TypeError("fetch failed")) : fetch(url, init),
    });
    const other = world.client({ authz: world.authz() });
    const sharing = world.client({ authz: world.authz({ settlementStore: shared }) });
    const wallet = await failing.wallet.get(payer.id);
    const tx = await wallet.send({
      to: payee.evm?.address as string,
      amount: 1,
      token: "USDC",
      chain: "base",
    });
    const list = failing.authz?.listFailedSettlements();
    expect(Array.isArray(list)).toBe(true);
    expect(list?.map((record) => record.decisionId)).toEqual([tx.spendDecisionId]);
    expect(list?.[0]?.attempts).toBe(1);
    expect(other.authz?.listFailedSettlements()).toEqual([]);
    expect(sharing.authz?.listFailedSettlements().map((r) => r.decisionId)).toEqual([tx.spendDecisionId]);
    // svc.authz.retryFailedSettlement(decisionId): true on success, and the record leaves the list.
    expect(await sharing.authz?.retryFailedSettlement(tx.spendDecisionId as string)).toBe(true);
    expect(failing.authz?.listFailedSettlements()).toEqual([]);
    expect(settled().some((row) => row.decision_id === tx.spendDecisionId)).toBe(true);
    expect(await sharing.authz?.retryFailedSettlement("dec_unknown")).toBe(false);
  });

  it("setAuthzSettlementLogger(fn) replaces the logger; logSettlementFailure(log) calls it; resetAuthzSettlementLogger() restores console.warn", () => {
    const log: AuthzSettlementFailureLog = {
      decisionId: "dec_x",
      provider: "svc",
      network: "eip155:1",
      asset: "0xa",
      amount: "1",
      credits: 1,
      txHash: "0xb",
      error: "down",
      attempts: 4,
    };
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    try {
      const seen: AuthzSettlementFailureLog[] = [];
      setAuthzSettlementLogger((entry) => seen.push(entry));
      logSettlementFailure(log);
      expect(seen).toEqual([log]);
      expect(warn).not.toHaveBeenCalled();
      resetAuthzSettlementLogger();
      logSettlementFailure(log);
      expect(seen).toHaveLength(1);
      expect(warn).toHaveBeenCalledTimes(1);
      expect(warn.mock.calls[0]?.[1]).toEqual(log);
      expect(String(warn.mock.calls[0]?.[0])).toContain("dec_x");
    } finally {
      warn.mockRestore();
    }
  });
});

describe("spec 7: SvcAuthzError, and nothing submitted", () => {
  async function expectAuthzError(client: SvcWallet, reason: string, statusCode: number | undefined) {
    const payer = await fundedWallet(world.admin);
    const wallet = await client.wallet.get(payer.id);
    const error = await wallet
      .send({ to: payee.evm?.address as string, amount: 1, token: "USDC", chain: "base" })
      .catch((e) => e);
    expect(error).toBeInstanceOf(SvcAuthzError);
    expect(error.reason).toBe(reason);
    expect(error.statusCode).toBe(statusCode);
    expect(await sendCount(payer)).toBe(0);
    return error as SvcAuthzError;
  }

  it("daemon unreachable", async () => {
    const error = await expectAuthzError(
      world.client({ authz: { gatewayUrl: "http://127.0.0.1:9", token: world.agentToken } }),
      "unreachable",
      undefined,
    );
    expect(error.message).toMatch(/unreachable/);
  });

  it("a redirect from the daemon's address is not followed: the spend goes nowhere else", async () => {
    const arrived: string[] = [];
    // Its body never ends: left unread, it would hold the connection until the answer was collected.
    let redirectClosed = false;
    const elsewhere = createServer((request, response) => {
      arrived.push(`${request.method} ${request.url}`);
      response.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
    await new Promise<void>((resolve) => elsewhere.listen(0, "127.0.0.1", resolve));
    const gateway = createServer((request, response) => {
      const { port } = elsewhere.address() as AddressInfo;
      response.writeHead(307, { location: `http://127.0.0.1:${port}${request.url}` });
      response.write("moved ".repeat(1_000));
      response.on("close", () => {
        redirectClosed = true;
      });
    });
    await new Promise<void>((resolve) => gateway.listen(0, "127.0.0.1", resolve));
    try {
      const { port } = gateway.address() as AddressInfo;
      const error = await expectAuthzError(
        world.client({ authz: { gatewayUrl: `http://127.0.0.1:${port}`, token: world.agentToken } }),
        "redirect",
        307,
      );
      expect(error.message).toContain("HTTP 307");
      expect(arrived).toEqual([]);
      await eventually(() => redirectClosed, {
        timeoutMs: 10_000,
        describe: "the redirect's connection to close",
      });
    } finally {
      gateway.closeAllConnections();
      await Promise.all([gateway, elsewhere].map((s) => new Promise((resolve) => s.close(resolve))));
    }
  });

  it("spend authorization not enabled on the daemon (503)", async () => {
    const disabled = await startTestDaemon({ SPEND_AUTHZ_ENABLED: "0" });
    try {
      const token = await disabled.identity("agent", ["wallet.spend.authorize", "wallet.spend.settle"]);
      await expectAuthzError(
        world.client({ authz: { gatewayUrl: disabled.url, token } }),
        "spend_authz_disabled",
        503,
      );
    } finally {
      await disabled.stop({ removeHome: true });
    }
  });

  it("capability missing (403)", async () => {
    const token = await world.daemon.identity("no-authorize", ["wallet.spend.settle"]);
    await expectAuthzError(world.client({ authz: world.authz({ token }) }), "missing_capability", 403);
  });

  it("bad token (401)", async () => {
    await expectAuthzError(world.client({ authz: world.authz({ token: "azd_wrong" }) }), "unauthorized", 401);
  });

  it("misconfigured: no per-call cap (no maxPerTx, no perCallCap), and bad authz options at construction", async () => {
    const payer = await fundedWallet(world.admin, {});
    const wallet = await world.client({ authz: world.authz() }).wallet.get(payer.id);
    const error = await wallet
      .send({ to: payee.evm?.address as string, amount: 1, token: "USDC", chain: "base" })
      .catch((e) => e);
    expect(error).toBeInstanceOf(SvcAuthzError);
    expect(error.reason).toBe("misconfigured");
    expect(await sendCount(payer)).toBe(0);
    expect(() => world.client({ authz: { ...world.authz(), retries: 1 } as never })).toThrow(SvcAuthzError);
    expect(() => world.client({ authz: { gatewayUrl: world.daemonUrl } as never })).toThrow(/token/);
    expect(() => world.client({ authz: world.authz({ perCallCap: "1.5" }) })).toThrow(/perCallCap/);
    expect(() => world.client({ authz: world.authz({ settlementRetryAttempts: -1 }) })).toThrow(
      /settlementRetryAttempts/,
    );
  });

  it("malformed response from the daemon", async () => {
    const { createServer } = await import("node:http");
    const broken = createServer((_request, response) => {
      response.writeHead(200, { "content-type": "application/json" });
      response.end(JSON.stringify({ approved: "yes" }));
    });
    await new Promise<void>((resolve) => broken.listen(0, "127.0.0.1", resolve));
    try {
      const { port } = broken.address() as { port: number };
      await expectAuthzError(
        world.client({
          authz: { gatewayUrl: `http://127.0.0.1:${port}`, token: "t", perCallCap: "100000000" },
        }),
        "malformed_response",
        200,
      );
    } finally {
      broken.close();
    }
  });
});

describe("beyond the anchors", () => {
  it("a spend refused by the service after approval cancels the approval with the daemon, so its credits come back", async () => {
    const payer = await fundedWallet(world.admin, {
      maxPerTx: "100",
      whitelist: [payee.solana?.address as string],
    });
    const cancelAnswers: unknown[] = [];
    const { calls, fetch } = recordingFetch(async (url, response) => {
      if (url.endsWith("/spend/cancel")) cancelAnswers.push(await response.clone().json());
    });
    const { wallet } = await gated(payer.id, { fetch });
    const budget = async () =>
      (
        await world.daemon.call<{ reserved_credits: number }>("GET", "/budgets/agent", {
          token: world.agentToken,
        })
      ).body.reserved_credits;
    const reservedBefore = await budget();
    const error = await wallet
      .send({ to: payee.evm?.address as string, amount: 2, token: "USDC", chain: "base" })
      .catch((e) => e);
    expect(error).toBeInstanceOf(SvcPolicyViolationError);
    expect(error.reason).toBe("recipient_not_allowed");
    expect(calls.filter((call) => call.startsWith("POST /spend"))).toEqual([
      "POST /spend/authorize",
      "POST /spend/cancel",
    ]);
    // The service consumed the decision before refusing, and gave it back itself: the gate's cancel is
    // told so, and that is no error of the caller's.
    expect(cancelAnswers).toMatchObject([{ code: "decision_released" }]);
    expect(await budget()).toBe(reservedBefore);
  });

  it("a Solana send that opens its recipient's token account is authorized again for what the service counts, the rent included", async () => {
    const payer = await fundedWallet(world.admin);
    // A new wallet holds no USDC account: the send opens one, and gives it its rent.
    const fresh = await world.admin.wallet.create({ name: "fresh", chains: ["solana"] });
    const { calls, fetch } = recordingFetch();
    const { wallet } = await gated(payer.id, { fetch });
    calls.length = 0;
    const tx = await wallet.send({
      to: fresh.solana?.address as string,
      amount: "0.01",
      token: "USDC",
      chain: "solana",
    });
    expect(calls.filter((call) => call.startsWith("POST /spend") || call.endsWith("/send"))).toEqual([
      "POST /spend/authorize",
      `POST /v1/wallets/${payer.id}/send`,
      "POST /spend/cancel",
      "POST /spend/authorize",
      `POST /v1/wallets/${payer.id}/send`,
      "POST /spend/settle",
    ]);
    const asked = decided().filter((row) => row.destination === fresh.solana?.address);
    expect(asked.map((row) => row.credits)).toEqual([1, expect.any(Number)]);
    const counted = asked[1]?.credits as number;
    // The rent of a token account (0.00203928 SOL) is worth far more than 0.01 USDC.
    expect(counted).toBeGreaterThan(10);
    expect(settled().find((row) => row.decision_id === tx.spendDecisionId)).toMatchObject({
      credits: counted,
    });
  });

  it("cancel takes 'already released by the service' and 'consumed by the service' as answers, not errors", async () => {
    const verifier = await world.daemon.identity("verifier-2", ["wallet.spend.verify"]);
    const gate = new SpendGate(world.authz());
    const spend = {
      context: { provider: "svc", network: baseNetwork, asset: usdcAddress, amount: "1000", credits: 1 },
      destination: payee.evm?.address as string,
      perCallCap: "100000000",
    };
    const asService = (path: string, decisionId: string) =>
      world.daemon.call("POST", path, { token: verifier, body: { decision_id: decisionId } });
    const state = async (decisionId: string) =>
      (await world.daemon.call("GET", `/spend/decisions/${decisionId}`, { token: verifier })).body.state;

    const plain = await gate.authorize(spend);
    expect(await gate.client.cancel(plain)).toBe("cancelled");
    expect(await gate.client.cancel(plain)).toBe("cancelled");

    const released = await gate.authorize(spend);
    expect((await asService("/spend/consume", released)).status).toBe(200);
    expect((await asService("/spend/release", released)).status).toBe(200);
    expect(await gate.client.cancel(released)).toBe("released");
    expect(await gate.cancel(released)).toBe(true);

    const consumed = await gate.authorize(spend);
    expect((await asService("/spend/consume", consumed)).status).toBe(200);
    expect(await gate.client.cancel(consumed)).toBe("consumed");
    expect(await gate.cancel(consumed)).toBe(false);
    expect(await state(consumed)).toBe("consumed");

    // A spend the service refused after consuming the decision (and could not give back): run rethrows
    // the service's refusal, nothing else.
    const refusal = new SvcPolicyViolationError({
      code: "PolicyViolation",
      status: 403,
      message: "refused",
      requestId: "req_x",
      reason: "max_per_tx",
    });
    let keptId = "";
    const error = await gate
      .run(
        spend,
        async (decisionId) => {
          keptId = decisionId;
          expect((await asService("/spend/consume", decisionId)).status).toBe(200);
          throw refusal;
        },
        () => undefined,
      )
      .catch((e) => e);
    expect(error).toBe(refusal);
    expect(await state(keptId)).toBe("consumed");

    // Other refusals stay errors of the bare client.
    const unknown = await gate.client.cancel(`dec_${"0".repeat(32)}`).catch((e) => e);
    expect(unknown).toBeInstanceOf(SvcAuthzError);
    expect(unknown.reason).toBe("decision_not_found");
  });

  it("SpendGate.run cancels only on a definite refusal; with the outcome unknown (no answer, a 5xx, the key still in use) the approval stays", async () => {
    const verifier = await world.daemon.identity("verifier", ["wallet.spend.verify"]);
    const gate = new SpendGate(world.authz());
    const spend = {
      context: { provider: "svc", network: baseNetwork, asset: usdcAddress, amount: "1000", credits: 1 },
      destination: payee.evm?.address as string,
      perCallCap: "100000000",
    };
    const stateAfter = async (failure: Error): Promise<unknown> => {
      let decisionId = "";
      const error = await gate
        .run(
          spend,
          async (id) => {
            decisionId = id;
            throw failure;
          },
          () => undefined,
        )
        .catch((e) => e);
      expect(error).toBe(failure);
      const lookup = await world.daemon.call("GET", `/spend/decisions/${decisionId}`, { token: verifier });
      return lookup.body.state;
    };
    const serviceError = (status: number, reason?: string) =>
      new SvcPolicyViolationError({ code: "X", status, message: "m", requestId: "req_x", reason });
    expect(await stateAfter(serviceError(403, "recipient_not_allowed"))).toBe("cancelled");
    expect(await stateAfter(serviceError(409, "idempotency_key_in_use"))).toBe("approved");
    expect(await stateAfter(serviceError(502, "chain_unavailable"))).toBe("approved");
    expect(
      await stateAfter(new SvcConnectionError({ code: "ConnectionError", status: 0, message: "no answer" })),
    ).toBe("approved");
  });

  it("a gated send whose answer was lost, repeated with its idempotencyKey, is the first send: that decision is settled, the retry's approval cancelled", async () => {
    const proxy = await FaultProxy.start(world.server.url);
    try {
      const payer = await fundedWallet(world.admin, { maxPerTx: "100" });
      const svc = world.client({ authz: world.authz(), baseUrl: `${proxy.url}/v1`, maxRetries: 0 });
      const wallet = await svc.wallet.get(payer.id);
      const input = { to: payee.evm?.address as string, amount: "1.5", token: "USDC", chain: "base" };
      const idempotencyKey = `lost-answer-${payer.id}`;

      proxy.inject(/^POST \/v1\/wallets\/[^/]+\/send /, "cut-response");
      const lost = await wallet.send(input, { idempotencyKey }).catch((e) => e);
      expect(lost).toBeInstanceOf(SvcConnectionError);

      const retried = await wallet.send(input, { idempotencyKey });
      const sends = (await wallet.transactions({ type: "send" })).data;
      expect(sends.map((tx) => tx.id)).toEqual([retried.id]);
      const [first, second] = decided()
        .slice(-2)
        .map((row) => row.decision_id as string);
      expect(retried.spendDecisionId).toBe(first);
      expect(settled().filter((row) => row.decision_id === first)).toHaveLength(1);
      const verifier = await world.daemon.identity("verifier-of-retries", ["wallet.spend.verify"]);
      const lookup = await world.daemon.call("GET", `/spend/decisions/${second}`, { token: verifier });
      expect(lookup.body.state).toBe("cancelled");
    } finally {
      await proxy.close();
    }
  });

  it("FileSettlementStore: an agent that restarts after a failed settlement still settles it", async () => {
    const payer = await fundedWallet(world.admin);
    setAuthzSettlementLogger(() => {});
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "sdk-store-")), "failed.json");
    const first = world.client({
      authz: world.authz({
        settlementRetryAttempts: 1,
        settlementRetryDelayMs: 1,
        settlementStore: new FileSettlementStore(file),
      }),
      fetch: (url, init) =>
        url.endsWith("/spend/settle") ? Promise.reject(new TypeError("fetch failed")) : fetch(url, init),
    });
    const tx = await (await first.wallet.get(payer.id)).send({
      to: payee.evm?.address as string,
      amount: 1,
      token: "USDC",
      chain: "base",
    });
    // "Restart": a new client and a new store object on the same file.
    const second = world.client({ authz: world.authz({ settlementStore: new FileSettlementStore(file) }) });
    expect(second.authz?.listFailedSettlements()).toMatchObject([
      { decisionId: tx.spendDecisionId, txHash: tx.txHash, attempts: 2 },
    ]);
    expect(await second.authz?.retryLatestFailedSettlement()).toBe(true);
    expect(new FileSettlementStore(file).list()).toEqual([]);
    expect(settled().some((row) => row.decision_id === tx.spendDecisionId)).toBe(true);
  });

  it("credits are the value in whole US cents rounded up, at least 1 (stablecoins 1:1, native at the service's price)", async () => {
    const payer = await fundedWallet(world.admin, { maxPerTx: "100" });
    const { wallet } = await gated(payer.id);
    const to = payee.evm?.address as string;
    const creditsOf = (tx: { spendDecisionId?: string }) =>
      decisionRow(tx.spendDecisionId as string)?.credits;
    expect(creditsOf(await wallet.send({ to, amount: "0.000001", token: "USDC", chain: "base" }))).toBe(1);
    expect(creditsOf(await wallet.send({ to, amount: "0.011", token: "USDC", chain: "base" }))).toBe(2);
    expect(creditsOf(await wallet.send({ to, amount: "0.001", token: "ETH", chain: "base" }))).toBe(300);
    // A recipient that holds a USDC account already: the send gives it nothing more than the amount.
    const holder = await world.admin.wallet.create({ name: "holder", chains: ["solana"] });
    await fundSolana(await sharedDevnet(), holder.solana?.address as never, { usdc: 1n });
    const solanaTx = await wallet.send({
      to: holder.solana?.address as string,
      amount: 1,
      token: "USDC",
      chain: "solana",
    });
    expect(decisionRow(solanaTx.spendDecisionId as string)).toMatchObject({
      credits: 100,
      network: expect.stringMatching(/^solana:/),
    });
  });
});
