import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../../test/support/eventually.ts";
import {
  SvcConnectionError,
  SvcForbiddenError,
  SvcInsufficientFundsError,
  SvcNotFoundError,
  SvcPolicyViolationError,
  SvcUnauthorizedError,
  SvcValidationError,
  type SvcWallet,
  type Wallet,
} from "../src/index.ts";
import { FaultProxy } from "./proxy.ts";
import { fundedWallet, startWorld, type World } from "./support.ts";

let world: World;
let proxy: FaultProxy;
let payee: Wallet;

beforeAll(async () => {
  world = await startWorld();
  proxy = await FaultProxy.start(world.server.url);
  payee = await world.admin.wallet.create({ name: "payee", chains: ["base"] });
});
afterAll(async () => {
  await proxy.close();
  await world.close();
});

/** A client that talks to the service through the fault proxy. */
function throughProxy(options: { maxRetries?: number; timeoutMs?: number } = {}): SvcWallet {
  return world.client({ baseUrl: `${proxy.url}/v1`, ...options });
}

/** The payee's USDC balance on base as the chain reports it (through the service's balance read). */
async function payeeUsdc(): Promise<string | undefined> {
  const balance = await payee.balance();
  return balance.balances.find((b) => b.chain === "base" && b.token === "USDC")?.amount;
}

describe("service errors surface as their subclass, with the service's message and requestId", () => {
  it.each([
    ["Unauthorized", SvcUnauthorizedError, 401],
    ["NotFound", SvcNotFoundError, 404],
    ["PolicyViolation", SvcPolicyViolationError, 403],
    ["InsufficientFunds", SvcInsufficientFundsError, 422],
    ["ValidationError", SvcValidationError, 400],
    ["Forbidden", SvcForbiddenError, 403],
  ] as const)("%s", async (code, Class, status) => {
    const to = payee.evm?.address as string;
    const make: Record<typeof code, () => Promise<unknown>> = {
      Unauthorized: () => world.client({ apiKey: "svc_notarealkey000000000000000000000000" }).wallet.list(),
      NotFound: () => world.admin.transactions.get("tx_doesnotexist000000000"),
      PolicyViolation: async () => {
        const wallet = await fundedWallet(world.admin, { maxPerTx: "1" });
        return wallet.send({ to, amount: 2, token: "USDC", chain: "base" });
      },
      InsufficientFunds: async () => {
        const wallet = await world.admin.wallet.create({ name: "empty", chains: ["base"] });
        return wallet.send({ to, amount: 2, token: "USDC", chain: "base" });
      },
      Forbidden: async () => {
        const agent = await world.admin.apiKeys.create({ name: "agent", role: "agent" });
        return world.client({ apiKey: agent.key }).wallet.create({ name: "not allowed", chains: ["base"] });
      },
      ValidationError: async () => {
        const wallet = await world.admin.wallet.create({ name: "bad address", chains: ["base"] });
        return wallet.send({ to: "0xnot-an-address", amount: 1, token: "USDC", chain: "base" });
      },
    };
    const error: any = await make[code]().catch((e) => e);
    expect(error).toBeInstanceOf(Class);
    expect(error).toMatchObject({ code, status });
    expect(error.requestId).toMatch(/^req_[0-9A-Za-z]+$/);
    expect(error.message).not.toBe("");
    // The message is the service's own: the same request made by hand answers the same text.
    if (code === "Unauthorized") expect(error.message).toBe("Invalid credentials");
    if (code === "NotFound") expect(error.message).toBe("Transaction tx_doesnotexist000000000 not found");
    if (code === "PolicyViolation") {
      expect(error.reason).toBe("max_per_tx");
      expect(error.details).toMatchObject({ rule: "maxPerTx" });
    }
    if (code === "InsufficientFunds") expect(error.reason).toMatch(/^insufficient_/);
    if (code === "ValidationError") expect(error.reason).toBe("invalid_address");
    if (code === "Forbidden") expect(error.reason).toBe("insufficient_role");
  });
});

describe("retries", () => {
  it("a send whose answer is lost (connection cut after the request was forwarded) is retried with the same Idempotency-Key: exactly one on-chain transfer", async () => {
    const payer = await fundedWallet(world.admin, {}, "dropped");
    const wallet = await throughProxy().wallet.get(payer.id);
    const before = await payeeUsdc();
    proxy.requests.length = 0;
    proxy.inject(/^POST \/v1\/wallets\/\S+\/send /, "cut-response");
    const tx = await wallet.send({
      to: payee.evm?.address as string,
      amount: 7,
      token: "USDC",
      chain: "base",
    });
    const sends = proxy.requests.filter((r) => r.line.includes("/send "));
    expect(sends).toHaveLength(2);
    expect(sends[0]?.idempotencyKey).toBeDefined();
    expect(sends[1]?.idempotencyKey).toBe(sends[0]?.idempotencyKey);
    const history = await payer.transactions({ type: "send" });
    expect(history.total).toBe(1);
    expect(history.data[0]).toMatchObject({ id: tx.id, txHash: tx.txHash, amount: "7" });
    const after = await payeeUsdc();
    expect(Number(after ?? 0) - Number(before ?? 0)).toBe(7);
  });

  it("an approve whose answer is lost is retried with the same Idempotency-Key: the held spend is broadcast once, not refused as already decided", async () => {
    const payer = await fundedWallet(world.admin, { approvalAbove: "5" }, "held, then dropped");
    const target = await world.admin.wallet.create({ name: "approval payee", chains: ["base"] });
    const held = await payer.send({
      to: target.evm?.address as string,
      amount: 6,
      token: "USDC",
      chain: "base",
    });
    expect(held.status).toBe("pending_approval");
    proxy.requests.length = 0;
    proxy.inject(/^POST \/v1\/approvals\/\S+\/approve /, "cut-response");
    const approved = await throughProxy().approvals.approve(held.id);
    const approves = proxy.requests.filter((r) => r.line.includes("/approve "));
    expect(approves).toHaveLength(2);
    expect(approves[0]?.idempotencyKey).toBeDefined();
    expect(approves[1]?.idempotencyKey).toBe(approves[0]?.idempotencyKey);
    expect(approved).toMatchObject({ id: held.id, approval: { status: "approved" } });
    const done = await payer.waitForTransaction(held.id, { timeoutMs: 120_000, intervalMs: 100 });
    expect(done).toMatchObject({ status: "confirmed", txHash: approved.txHash });
    const { balances } = await target.balance();
    expect(balances.find((b) => b.chain === "base" && b.token === "USDC")?.amount).toBe("6");
  });

  it("a 5xx answer is retried (same key) and the send goes through once", async () => {
    const payer = await fundedWallet(world.admin, {}, "503");
    const wallet = await throughProxy().wallet.get(payer.id);
    proxy.requests.length = 0;
    proxy.inject(/^POST \/v1\/wallets\/\S+\/send /, "answer-503");
    const tx = await wallet.send({
      to: payee.evm?.address as string,
      amount: 1,
      token: "USDC",
      chain: "base",
    });
    const keys = proxy.requests.filter((r) => r.line.includes("/send ")).map((r) => r.idempotencyKey);
    expect(keys).toHaveLength(2);
    expect(new Set(keys).size).toBe(1);
    expect((await payer.transactions({ type: "send" })).data.map((t) => t.id)).toEqual([tx.id]);
  });

  it("a timed-out attempt is retried with the same key; with no retries left the error is SvcConnectionError reason timeout", async () => {
    const payer = await fundedWallet(world.admin, {}, "timeout");
    // Long enough for a loaded machine to broadcast the first attempt; that attempt's answer is held back.
    const wallet = await throughProxy({ timeoutMs: 6_000 }).wallet.get(payer.id);
    proxy.requests.length = 0;
    proxy.inject(/^POST \/v1\/wallets\/\S+\/send /, "hold-response");
    const tx = await wallet.send({
      to: payee.evm?.address as string,
      amount: 1,
      token: "USDC",
      chain: "base",
    });
    const keys = proxy.requests.filter((r) => r.line.includes("/send ")).map((r) => r.idempotencyKey);
    expect(keys.length).toBe(2);
    expect(new Set(keys).size).toBe(1);
    expect((await payer.transactions({ type: "send" })).data.map((t) => t.id)).toEqual([tx.id]);

    const once = await throughProxy({ timeoutMs: 1_000, maxRetries: 0 }).wallet.get(payer.id);
    proxy.inject(/^GET \/v1\/wallets\/\S+\/balance /, "hold-response");
    const error = await once.balance().catch((e) => e);
    expect(error).toBeInstanceOf(SvcConnectionError);
    expect(error.reason).toBe("timeout");
  });

  it("the caller's own Idempotency-Key is used, and a second call with it moves nothing more", async () => {
    const payer = await fundedWallet(world.admin, {}, "own key");
    const wallet = await throughProxy().wallet.get(payer.id);
    proxy.requests.length = 0;
    const input = { to: payee.evm?.address as string, amount: 2, token: "USDC", chain: "base" };
    const first = await wallet.send(input, { idempotencyKey: "invoice-42" });
    const second = await wallet.send(input, { idempotencyKey: "invoice-42" });
    expect(second).toEqual(first);
    expect(proxy.requests.filter((r) => r.line.includes("/send ")).map((r) => r.idempotencyKey)).toEqual([
      "invoice-42",
      "invoice-42",
    ]);
    expect((await payer.transactions({ type: "send" })).total).toBe(1);
  });

  it("each send call gets its own generated key", async () => {
    const payer = await fundedWallet(world.admin, {}, "keys");
    const wallet = await throughProxy().wallet.get(payer.id);
    proxy.requests.length = 0;
    const input = { to: payee.evm?.address as string, amount: 1, token: "USDC", chain: "base" };
    await wallet.send(input);
    await wallet.send(input);
    const keys = proxy.requests.filter((r) => r.line.includes("/send ")).map((r) => r.idempotencyKey);
    expect(keys).toHaveLength(2);
    expect(keys[0]).not.toBe(keys[1]);
    expect((await payer.transactions({ type: "send" })).total).toBe(2);
  });

  it("a request that is not safe to repeat (wallet creation) is not retried after a lost answer", async () => {
    const svc = throughProxy();
    const before = (await world.admin.wallet.list()).length;
    proxy.requests.length = 0;
    proxy.inject(/^POST \/v1\/wallets /, "cut-response");
    const error = await svc.wallet.create({ name: "once", chains: ["base"] }).catch((e) => e);
    expect(error).toBeInstanceOf(SvcConnectionError);
    expect(proxy.requests.filter((r) => r.line.startsWith("POST /v1/wallets "))).toHaveLength(1);
    expect((await world.admin.wallet.list()).length).toBe(before + 1);
  });

  it("the caller's AbortSignal stops the call: SvcConnectionError reason aborted", async () => {
    const payer = await fundedWallet(world.admin, {}, "abort");
    const wallet = await throughProxy().wallet.get(payer.id);
    proxy.inject(/^POST \/v1\/wallets\/\S+\/send /, "hold-response");
    const controller = new AbortController();
    const pending = wallet.send(
      { to: payee.evm?.address as string, amount: 1, token: "USDC", chain: "base" },
      { signal: controller.signal },
    );
    setTimeout(() => controller.abort(new Error("user cancelled")), 200);
    const error = await pending.catch((e) => e);
    expect(error).toBeInstanceOf(SvcConnectionError);
    expect(error.reason).toBe("aborted");
    expect(error.message).toContain("user cancelled");
  });
});

describe("redirects", () => {
  it("a redirect is not followed: a login's password and a request's credential stay with the base URL's origin", async () => {
    // Another origin, recording what reaches it: where a gateway's (or anyone's) redirect would send the SDK.
    const arrived: string[] = [];
    const elsewhere = createServer((request, response) => {
      let body = "";
      request.on("data", (chunk) => {
        body += chunk;
      });
      request.on("end", () => {
        arrived.push(`${request.method} ${request.url} ${request.headers.authorization ?? ""} ${body}`);
        response.writeHead(200, { "content-type": "application/json" }).end("{}");
      });
    });
    const gateway = createServer((request, response) => {
      response.writeHead(307, { location: `http://localhost:${portOf(elsewhere)}${request.url}` }).end();
    });
    await Promise.all([listen(elsewhere), listen(gateway)]);
    try {
      const svc = world.client({ baseUrl: `http://127.0.0.1:${portOf(gateway)}/v1` });
      const login = await svc.auth
        .login({ email: "redirected@example.com", password: "correct-horse-battery" })
        .catch((e) => e);
      expect(login).toBeInstanceOf(SvcConnectionError);
      expect(login.reason).toBe("redirect");
      expect(login.message).toContain("HTTP 307");
      const me = await svc.auth.me().catch((e) => e);
      expect(me).toBeInstanceOf(SvcConnectionError);
      expect(arrived).toEqual([]);
    } finally {
      await Promise.all([close(gateway), close(elsewhere)]);
    }
  });

  it("a redirect's body is not left open: the connection it came on is let go at once", async () => {
    // A redirect whose body never ends: left unread, it would hold the socket until the Response was collected.
    let closed = false;
    const gateway = createServer((_request, response) => {
      response.writeHead(307, { location: "http://127.0.0.1:9/v1/auth/me" });
      response.write("moved ".repeat(1_000));
      response.on("close", () => {
        closed = true;
      });
    });
    await listen(gateway);
    try {
      const svc = world.client({ baseUrl: `http://127.0.0.1:${portOf(gateway)}/v1` });
      const me = await svc.auth.me().catch((e) => e);
      expect(me.reason).toBe("redirect");
      await eventually(() => closed, { timeoutMs: 10_000, describe: "the redirect's connection to close" });
    } finally {
      gateway.closeAllConnections();
      await close(gateway);
    }
  });
});

function listen(server: Server): Promise<void> {
  return new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
}

function close(server: Server): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()));
}

function portOf(server: Server): number {
  return (server.address() as AddressInfo).port;
}
