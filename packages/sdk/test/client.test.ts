import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  DEFAULT_BASE_URL,
  SvcAuthzError,
  SvcForbiddenError,
  SvcNotFoundError,
  SvcUnauthorizedError,
  SvcValidationError,
  SvcWallet,
  type Transaction,
  type Wallet,
} from "../src/index.ts";
import { countingFetch, fundedWallet, startWorld, type World } from "./support.ts";

let world: World;
let payer: Wallet;
let payee: Wallet;

beforeAll(async () => {
  world = await startWorld();
  payer = await fundedWallet(world.admin);
  payee = await world.admin.wallet.create({ name: "payee", chains: ["base", "solana"] });
});
afterAll(() => world.close());

describe("SvcWallet construction", () => {
  it("throws on an unknown constructor option, naming it", () => {
    expect(() => new SvcWallet({ apiKey: "svc_x", retries: 3 } as never)).toThrow(
      /Unknown SvcWallet option "retries"/,
    );
    expect(() => new SvcWallet({ apiKey: "svc_x", retries: 3 } as never)).toThrow(SvcValidationError);
  });

  it("throws on malformed options: baseUrl, maxRetries, timeoutMs, fetch", () => {
    expect(() => new SvcWallet({ baseUrl: "localhost:8080" })).toThrow(/baseUrl/);
    expect(() => new SvcWallet({ maxRetries: -1 })).toThrow(/maxRetries/);
    expect(() => new SvcWallet({ maxRetries: 1.5 })).toThrow(/maxRetries/);
    expect(() => new SvcWallet({ timeoutMs: 0 })).toThrow(/timeoutMs/);
    // AbortSignal.timeout takes whole milliseconds up to 2^32 - 1: anything else would fail at the first call.
    expect(() => new SvcWallet({ timeoutMs: 0.001 })).toThrow(SvcValidationError);
    expect(() => new SvcWallet({ timeoutMs: 2 ** 32 })).toThrow(/timeoutMs/);
    expect(() => new SvcWallet({ fetch: "fetch" as never })).toThrow(/fetch/);
  });

  it("a baseUrl or gatewayUrl with a user name or password is refused, and the password is in no message", async () => {
    const secret = "hunter2-in-the-url";
    const baseUrl = world.baseUrl.replace("http://", `http://ada:${secret}@`);
    // fetch refuses such a URL with an error that repeats it whole: every call failed, printing the password.
    const error = await (async () =>
      new SvcWallet({ apiKey: world.accessToken, baseUrl }).chains.list())().catch((e) => e);
    expect(error).toBeInstanceOf(SvcValidationError);
    expect(error.reason).toBe("invalid_option");
    expect(error.message).toMatch(/baseUrl .*no user name or password/);
    expect(error.message).not.toContain(secret);
    const gatewayUrl = world.baseUrl.replace("http://", `http://daemon:${secret}@`);
    const authzError = await (async () =>
      new SvcWallet({ apiKey: world.accessToken, authz: { gatewayUrl, token: "daemon-token" } }))().catch(
      (e) => e,
    );
    expect(authzError).toBeInstanceOf(SvcAuthzError);
    expect(authzError.message).toMatch(/gatewayUrl .*no user name or password/);
    expect(authzError.message).not.toContain(secret);
  });

  it("defaults baseUrl to the local service", async () => {
    const requested: string[] = [];
    const svc = new SvcWallet({
      apiKey: world.accessToken,
      // Only the port differs from the default: the test service listens on a free one.
      fetch: (url, init) => {
        requested.push(url);
        return fetch(url.replace(DEFAULT_BASE_URL, world.baseUrl), init);
      },
    });
    await svc.chains.list();
    expect(DEFAULT_BASE_URL).toBe("http://127.0.0.1:8080/v1");
    expect(requested).toEqual(["http://127.0.0.1:8080/v1/chains"]);
  });
});

describe("auth and API keys", () => {
  it("registers, logs in, and the access token works as a credential", async () => {
    const anonymous = new SvcWallet({ baseUrl: world.baseUrl });
    const email = `sdk-${randomBytes(4).toString("hex")}@example.com`;
    const password = "correct-horse-battery";
    const account = await anonymous.auth.register({ email, password, name: "Ada" });
    expect(account).toMatchObject({ email, name: "Ada" });
    expect(account.userId).toMatch(/^usr_/);
    const login = await anonymous.auth.login({ email, password });
    expect(login.expiresIn).toBe(3600);
    const owner = new SvcWallet({ apiKey: login.accessToken, baseUrl: world.baseUrl });
    expect(await owner.wallet.list()).toEqual([]);
  });

  it("a wrong password is SvcUnauthorizedError with the service's message and requestId", async () => {
    const anonymous = new SvcWallet({ baseUrl: world.baseUrl });
    const error = await anonymous.auth
      .login({ email: "nobody@example.com", password: "wrong-password-1" })
      .catch((e) => e);
    expect(error).toBeInstanceOf(SvcUnauthorizedError);
    expect(error).toMatchObject({ code: "Unauthorized", status: 401, message: "Invalid email or password" });
    expect(error.requestId).toMatch(/^req_/);
  });

  it("creates, lists and revokes API keys; the key value only in the creation response; a revoked key is refused", async () => {
    const created = await world.admin.apiKeys.create({ name: "sdk test key" });
    expect(created.key).toMatch(/^svc_/);
    expect(created.id).toMatch(/^key_/);
    const listed = await world.admin.apiKeys.list();
    const mine = listed.find((key) => key.id === created.id);
    expect(mine).toMatchObject({ name: "sdk test key" });
    expect(mine).not.toHaveProperty("key");
    const withKey = world.client({ apiKey: created.key });
    await withKey.chains.list();
    await world.admin.apiKeys.revoke(created.id);
    expect((await world.admin.apiKeys.list()).some((key) => key.id === created.id)).toBe(false);
    const error = await withKey.wallet.list().catch((e) => e);
    expect(error).toBeInstanceOf(SvcUnauthorizedError);
    expect(error.reason).toBe("key_revoked");
  });
});

describe("key roles: an admin sets up, an agent spends within the limits", () => {
  it("an admin key creates a wallet and its policy; an agent key bound to it sends, may tighten, may not loosen (SvcForbiddenError)", async () => {
    const adminKey = await world.admin.apiKeys.create({ name: "owner", role: "admin" });
    expect(adminKey.role).toBe("admin");
    const owner = world.client({ apiKey: adminKey.key });
    const wallet = await fundedWallet(owner, { maxPerTx: "10", dailyLimit: "50" }, "agent wallet");
    const agentKey = await owner.apiKeys.create({ name: "agent", role: "agent", walletIds: [wallet.id] });
    expect(agentKey).toMatchObject({ role: "agent", walletIds: [wallet.id], expiresAt: null });
    const agent = world.client({ apiKey: agentKey.key });
    const mine = await agent.wallet.get(wallet.id);
    const tx = await mine.send({ to: payee.evm?.address as string, amount: 2, token: "USDC", chain: "base" });
    expect(tx.status).toBe("pending");
    expect(await mine.policy.update({ maxPerTx: "5" })).toMatchObject({ maxPerTx: "5" });
    const loosen = await mine.policy.update({ maxPerTx: "500" }).catch((e) => e);
    expect(loosen).toBeInstanceOf(SvcForbiddenError);
    expect(loosen).toMatchObject({ status: 403, reason: "insufficient_role" });
    expect((await mine.policy.get()).maxPerTx).toBe("5");
    // Other wallets of the account are invisible to a wallet-bound key.
    const other = await agent.wallet.get(payer.id).catch((e) => e);
    expect(other).toBeInstanceOf(SvcNotFoundError);
    const created = await agent.wallet.create({ name: "nope", chains: ["base"] }).catch((e) => e);
    expect(created).toBeInstanceOf(SvcForbiddenError);
  });
});

describe("chains, wallets, transactions", () => {
  it("chains.list gives the CAIP-2 networks, token addresses and decimals", async () => {
    const chains = await world.admin.chains.list();
    const base = chains.find((chain) => chain.name === "base");
    expect(base?.network).toMatch(/^eip155:\d+$/);
    const usdc = base?.tokens.find((token) => token.symbol === "USDC");
    expect(usdc?.decimals).toBe(6);
    expect(usdc?.address).toMatch(/^0x[0-9a-fA-F]{40}$/);
    expect(chains.find((chain) => chain.name === "solana")?.network).toMatch(/^solana:/);
  });

  it("wallet.create returns a wallet object with the record's fields; get and list find it", async () => {
    const wallet = await world.admin.wallet.create({
      name: "fields",
      chains: ["base"],
      metadata: { team: "research" },
      policy: { maxPerTx: 10, dailyLimit: "50" },
    });
    expect(wallet).toMatchObject({
      name: "fields",
      chains: ["base"],
      metadata: { team: "research" },
      status: "active",
    });
    expect(wallet.id).toMatch(/^wal_/);
    expect(wallet.evm?.address).toMatch(/^0x/);
    expect(wallet.solana).toBeUndefined();
    const got = await world.admin.wallet.get(wallet.id);
    expect(got.toJSON()).toEqual(wallet.toJSON());
    expect((await world.admin.wallet.list()).map((w) => w.id)).toContain(wallet.id);
    expect(await wallet.policy.get()).toMatchObject({ maxPerTx: "10", dailyLimit: "50", status: "active" });
  });

  it("wallet.get of an unknown wallet is SvcNotFoundError (404)", async () => {
    const error = await world.admin.wallet.get("wal_doesnotexist0000000000").catch((e) => e);
    expect(error).toBeInstanceOf(SvcNotFoundError);
    expect(error.status).toBe(404);
    expect(error.requestId).toMatch(/^req_/);
  });

  it("an id of . or .. is refused before any request: the URL would resolve it away, to another route", async () => {
    const counting = countingFetch();
    const client = world.client({ fetch: counting.fetch });
    for (const id of [".", ".."]) {
      for (const call of [
        () => client.wallet.get(id),
        () => client.transactions.get(id),
        () => client.apiKeys.revoke(id),
        () => payer.waitForTransaction(id),
      ]) {
        const error = await call().catch((e: unknown) => e);
        expect(error, id).toBeInstanceOf(SvcValidationError);
        expect((error as Error).message, id).toContain("not . or ..");
      }
    }
    expect(counting.calls).toEqual([]);
  });

  it("sends with a number amount; the returned amount is a decimal string; transactions.get reads it back", async () => {
    const tx = await payer.send({
      to: payee.evm?.address as string,
      amount: 1.25,
      token: "USDC",
      chain: "base",
    });
    expect(tx).toMatchObject({
      type: "send",
      amount: "1.25",
      token: "USDC",
      chain: "base",
      walletId: payer.id,
    });
    expect(typeof tx.amount).toBe("string");
    expect(tx.txHash).toMatch(/^0x[0-9a-f]{64}$/);
    const read = await world.admin.transactions.get(tx.id);
    expect(read).toMatchObject({ id: tx.id, amount: "1.25", txHash: tx.txHash });
  });

  it("sends the native coin and on solana", async () => {
    const eth = await payer.send({
      to: payee.evm?.address as string,
      amount: "0.001",
      token: "ETH",
      chain: "base",
    });
    expect(eth).toMatchObject({ amount: "0.001", token: "ETH" });
    const sol = await payer.send({
      to: payee.solana?.address as string,
      amount: 0.5,
      token: "USDC",
      chain: "solana",
    });
    expect(sol).toMatchObject({ amount: "0.5", chain: "solana" });
  });

  it("amounts: NaN, infinities, negatives and too many decimals throw before any request", async () => {
    const { fetch, calls } = countingFetch();
    const svc = world.client({ fetch });
    const wallet = await svc.wallet.get(payer.id);
    await svc.chains.list(); // chains are read once and cached; what follows must send nothing
    calls.length = 0;
    const to = payee.evm?.address as string;
    for (const amount of [
      Number.NaN,
      Number.POSITIVE_INFINITY,
      Number.NEGATIVE_INFINITY,
      -1,
      "-1",
      0.0000001,
      "1.0000001",
      "1e3",
      "abc",
      "",
    ]) {
      const error = await wallet.send({ to, amount, token: "USDC", chain: "base" }).catch((e) => e);
      expect(error, String(amount)).toBeInstanceOf(SvcValidationError);
      expect(error.reason).toBe("invalid_amount");
      expect(error.status).toBe(0);
    }
    expect(calls).toEqual([]);
  });

  it("a number is sent by its shortest round-trip decimal form", async () => {
    const { fetch } = countingFetch();
    const bodies: unknown[] = [];
    const svc = world.client({
      fetch: (url, init) => {
        if (url.endsWith("/send")) bodies.push(JSON.parse(String(init.body)));
        return fetch(url, init);
      },
    });
    const wallet = await svc.wallet.get(payer.id);
    await wallet.send({ to: payee.evm?.address as string, amount: 0.3, token: "USDC", chain: "base" });
    await wallet.send({ to: payee.evm?.address as string, amount: 1e-6, token: "USDC", chain: "base" });
    expect(bodies).toMatchObject([{ amount: "0.3" }, { amount: "0.000001" }]);
  });

  it("transactions(query) gives a page; iterating it walks every page", async () => {
    const wallet = await fundedWallet(world.admin, {}, "history");
    const to = payee.evm?.address as string;
    const sent: Transaction[] = [];
    for (let i = 1; i <= 5; i++)
      sent.push(await wallet.send({ to, amount: i, token: "USDC", chain: "base" }));
    const page = await wallet.transactions({ type: "send", limit: 2 });
    expect(page).toMatchObject({ total: 5, limit: 2, offset: 0 });
    expect(page.data.map((tx) => tx.amount)).toEqual(["5", "4"]);
    const all: string[] = [];
    for await (const tx of wallet.transactions({ type: "send", limit: 2 })) all.push(tx.amount);
    expect(all).toEqual(["5", "4", "3", "2", "1"]);
    const pageSizes: number[] = [];
    for await (const p of wallet.transactions({ type: "send", limit: 2 }).pages())
      pageSizes.push(p.data.length);
    expect(pageSizes).toEqual([2, 2, 1]);
  });

  it("balance() reads the chains; faucet() pays test coins and returns the receive", async () => {
    const wallet = await world.admin.wallet.create({ name: "faucet", chains: ["base"] });
    const receive = await wallet.faucet({ chain: "base", token: "USDC", amount: 25 });
    expect(receive).toMatchObject({ type: "receive", amount: "25", token: "USDC", status: "confirmed" });
    const balance = await wallet.balance();
    expect(balance.walletId).toBe(wallet.id);
    expect(balance.balances.find((b) => b.chain === "base" && b.token === "USDC")).toMatchObject({
      amount: "25",
    });
  });

  it("policy get/update/pause/resume; a paused wallet's send is refused", async () => {
    const wallet = await fundedWallet(world.admin, {}, "policy");
    expect(await wallet.policy.update({ maxPerTx: 5, dailyLimit: "20" })).toMatchObject({
      maxPerTx: "5",
      dailyLimit: "20",
    });
    expect((await wallet.policy.pause()).status).toBe("paused");
    const refused = await wallet
      .send({ to: payee.evm?.address as string, amount: 1, chain: "base" })
      .catch((e) => e);
    expect(refused).toMatchObject({ code: "PolicyViolation", reason: "policy_paused" });
    expect((await wallet.policy.resume()).status).toBe("active");
    expect(await wallet.policy.get()).toMatchObject({ maxPerTx: "5", status: "active" });
  });

  it("auth.me() tells an admin credential from an agent key bound to its wallets", async () => {
    const admin = await world.admin.auth.me();
    expect(admin.role).toBe("admin");
    const wallet = await world.admin.wallet.create({ name: "me", chains: ["base"] });
    const { key, id } = await world.admin.apiKeys.create({
      name: "me agent",
      role: "agent",
      walletIds: [wallet.id],
    });
    const agent = world.client({ apiKey: key });
    expect(await agent.auth.me()).toMatchObject({
      userId: admin.userId,
      role: "agent",
      apiKey: { id, name: "me agent", walletIds: [wallet.id] },
    });
  });

  it("spending() gives the daily limit's figures and the spends by hour", async () => {
    const wallet = await fundedWallet(world.admin, { dailyLimit: "20" }, "spending");
    await wallet.send({ to: payee.evm?.address as string, amount: 3, chain: "base" });
    const spending = await wallet.spending();
    expect(spending).toMatchObject({
      walletId: wallet.id,
      dailyLimit: "20.00",
      used: "3.00",
      remaining: "17.00",
    });
    expect(spending.hours).toHaveLength(24);
    expect(spending.hours.at(-1)?.usd).toBe("3.00");
  });

  it("archive() archives: the record says so and a send is refused; restore() undoes it", async () => {
    const wallet = await world.admin.wallet.create({ name: "to archive", chains: ["base"] });
    await wallet.archive();
    expect((await world.admin.wallet.get(wallet.id)).status).toBe("archived");
    const error = await wallet
      .send({ to: payee.evm?.address as string, amount: 1, chain: "base" })
      .catch((e) => e);
    expect(error).toBeInstanceOf(SvcValidationError);
    expect(error.reason).toBe("wallet_archived");
    // The owner brings it back.
    await wallet.restore();
    expect((await world.admin.wallet.get(wallet.id)).status).toBe("active");
  });

  it("an unknown chain or token is refused before any request", async () => {
    const { fetch, calls } = countingFetch();
    const svc = world.client({ fetch });
    const wallet = await svc.wallet.get(payer.id);
    await svc.chains.list();
    calls.length = 0;
    const token = await wallet.send({ to: "0x1", amount: 1, token: "DOGE", chain: "base" }).catch((e) => e);
    expect(token).toMatchObject({ reason: "unknown_token", status: 0 });
    expect(calls).toEqual([]);
    const chain = await wallet.send({ to: "0x1", amount: 1, chain: "dogechain" }).catch((e) => e);
    expect(chain).toMatchObject({ reason: "unknown_chain", status: 0 });
    // An unknown chain name is looked up once more (the deployment may have changed), then refused.
    expect(calls).toEqual(["GET /v1/chains"]);
  });
});
