/**
 * `svc` run as a process against a real service on the local chains: every command in sequence, `--json`
 * parsed and asserted, sends confirmed on chain, refusals with their exit codes and one line on stderr.
 */
import fs from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { IDLE_BLOCK_SECONDS } from "@svc/devnet";
import { verifyWebhook } from "@svc/sdk";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../../test/support/eventually.ts";
import { selectRows } from "../../server/src/internal/db/store.ts";
import {
  createTestServer,
  seedAccount,
  sharedDevnet,
  type TestServer,
} from "../../server/test/support/test-server.ts";
import { WebhookReceiver } from "../../server/test/support/webhook-receiver.ts";
import { type Run, svc, svcFromBin } from "./support.ts";

let server: TestServer;
let owner: Awaited<ReturnType<typeof seedAccount>>;
let home: string;
let configFile: string;
/** The environment of a logged-in user: the config file only, no key in the environment. */
let env: Record<string, string>;

beforeAll(async () => {
  server = await createTestServer({ x402Demo: true });
  owner = await seedAccount(server.api, "cli");
  home = fs.mkdtempSync(path.join(os.tmpdir(), "svc-cli-"));
  configFile = path.join(home, "config", "svc.json");
  env = { HOME: home, SVC_CONFIG: configFile };
});
afterAll(async () => {
  await server?.close();
  if (home) fs.rmSync(home, { recursive: true, force: true });
});

/** How many access tokens the service (the file's, unless told) holds as ended by a logout. */
async function endedAccessTokens(of: TestServer = server): Promise<number> {
  const [row] = await selectRows<{ count: number }>(
    of.service.store.db,
    sql`SELECT count(*)::int AS count FROM ended_access_tokens`,
  );
  return row?.count ?? 0;
}

/** The run failed with `code` and said one line on stderr, nothing on stdout, no stack trace. */
function expectOneLineFailure(run: Run, code: number): string {
  expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(code);
  expect(run.stdout).toBe("");
  const lines = run.stderr.trimEnd().split("\n");
  expect(lines, run.stderr).toHaveLength(1);
  expect(run.stderr).not.toMatch(/\n\s+at /);
  return lines[0] as string;
}

function expectOk(run: Run): void {
  expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
}

let payer: { id: string; evm: { address: string } };
let payee: { id: string; evm: { address: string } };
let loginKeyId: string;

describe("svc login", () => {
  it("logs in with email and password, saving the base URL and a new admin key in a 0600 file", async () => {
    const endedBefore = await endedAccessTokens();
    const run = await svc(["login", "--email", owner.email, "--base-url", server.url, "--json"], {
      ...env,
      SVC_PASSWORD: owner.password,
    });
    expectOk(run);
    const result = run.json();
    expect(result).toEqual({
      email: owner.email,
      baseUrl: `${server.url}/v1`,
      keyId: expect.stringMatching(/^key_/),
      configFile,
    });
    expect(fs.statSync(configFile).mode & 0o777).toBe(0o600);
    expect(fs.statSync(path.dirname(configFile)).mode & 0o777).toBe(0o700);
    const saved = JSON.parse(fs.readFileSync(configFile, "utf8"));
    expect(saved).toEqual({
      baseUrl: `${server.url}/v1`,
      apiKey: expect.stringMatching(/^svc_/),
      keyId: result.keyId,
      email: owner.email,
      deviceToken: expect.any(String),
    });
    // The key is never printed.
    expect(run.stdout + run.stderr).not.toContain(saved.apiKey);
    loginKeyId = result.keyId;
    // The login's access token, which only made the key, was ended (logged out) rather than left for its hour.
    expect(await endedAccessTokens()).toBe(endedBefore + 1);
  });

  it("logging in again (password on stdin) replaces the key, revokes the old one and restores mode 0600", async () => {
    fs.chmodSync(configFile, 0o644);
    const run = await svc(["login", "--email", owner.email, "--json"], env, `${owner.password}\n`);
    expectOk(run);
    const { keyId } = run.json();
    expect(keyId).not.toBe(loginKeyId);
    expect(fs.statSync(configFile).mode & 0o777).toBe(0o600);
    const keys = (await svc(["keys", "list", "--json"], env)).json<{ id: string; role: string }[]>();
    expect(keys.map((key) => key.id)).toContain(keyId);
    expect(keys.map((key) => key.id)).not.toContain(loginKeyId);
  });

  it("a wrong password: exit 2 and the service's message with its request id", async () => {
    const run = await svc(["login", "--email", owner.email], { ...env, SVC_PASSWORD: "not-the-password-1" });
    const line = expectOneLineFailure(run, 2);
    expect(line).toMatch(/^error: .+ \(Unauthorized invalid_credentials, request req_\w+\)$/);
  });
});

describe("svc login while someone else guesses at the email", () => {
  it("logs in from a config file that logged in before, while the email is limited for everyone else", async () => {
    const limited = await createTestServer({ env: { SVC_LOGIN_LIMIT_PER_MINUTE: "3" } });
    const ownHome = fs.mkdtempSync(path.join(os.tmpdir(), "svc-cli-device-"));
    const known = { HOME: ownHome, SVC_CONFIG: path.join(ownHome, "known.json") };
    try {
      const user = await seedAccount(limited.api, "guessed"); // its login is the email's first attempt
      const login = (files: Record<string, string>) =>
        svc(["login", "--email", user.email, "--base-url", limited.url, "--json"], {
          ...files,
          SVC_PASSWORD: user.password,
        });
      expectOk(await login(known));
      const guesses = [];
      for (let i = 0; i < 3; i++)
        guesses.push(
          (await limited.api.post("/v1/auth/login", { email: user.email, password: "someone-guessing" }))
            .status,
        );
      expect(guesses).toEqual([401, 429, 429]);

      expectOk(await login(known));
      // It did not wait the limit out (the SDK waits a 429's Retry-After): the email is limited still.
      const guess = await limited.api.post("/v1/auth/login", {
        email: user.email,
        password: "someone-guessing",
      });
      expect(guess.status).toBe(429);
    } finally {
      await limited.close();
      fs.rmSync(ownHome, { recursive: true, force: true });
    }
  });
});

describe("svc login at the account's API key limit", () => {
  it("logging in again makes room by revoking the file's old key first", async () => {
    const limited = await createTestServer({ env: { SVC_MAX_API_KEYS_PER_ACCOUNT: "2" } });
    const ownHome = fs.mkdtempSync(path.join(os.tmpdir(), "svc-cli-limit-"));
    const ownEnv = { HOME: ownHome, SVC_CONFIG: path.join(ownHome, "svc.json") };
    try {
      const user = await seedAccount(limited.api, "at-limit"); // holds one key: the CLI's makes two
      const login = () =>
        svc(["login", "--email", user.email, "--base-url", limited.url, "--json"], {
          ...ownEnv,
          SVC_PASSWORD: user.password,
        });
      const first = await login();
      expectOk(first);
      const again = await login();
      expectOk(again);
      const keys = (await svc(["keys", "list", "--json"], ownEnv)).json<{ id: string }[]>();
      expect(keys.map((key) => key.id).sort()).toEqual([user.apiKeyId, again.json().keyId].sort());
    } finally {
      await limited.close();
      fs.rmSync(ownHome, { recursive: true, force: true });
    }
  });

  it("when the room made is taken before the new key is made, the file no longer holds the revoked key", async () => {
    const limited = await createTestServer({ env: { SVC_MAX_API_KEYS_PER_ACCOUNT: "2" } });
    const ownHome = fs.mkdtempSync(path.join(os.tmpdir(), "svc-cli-limit-"));
    const ownEnv = { HOME: ownHome, SVC_CONFIG: path.join(ownHome, "svc.json") };
    const user = await seedAccount(limited.api, "room-taken");
    // A proxy in front of the service; once told to, it has another key made as soon as a revocation is done.
    let takeTheRoom = false;
    const proxy = createServer(async (request, response) => {
      const chunks: Buffer[] = [];
      for await (const chunk of request) chunks.push(chunk as Buffer);
      const forwarded = await fetch(`${limited.url}${request.url}`, {
        method: request.method ?? "GET",
        headers: Object.fromEntries(
          Object.entries(request.headers).filter(([name]) => !["host", "connection"].includes(name)),
        ) as Record<string, string>,
        ...(chunks.length > 0 ? { body: Buffer.concat(chunks) } : {}),
      });
      const body = Buffer.from(await forwarded.arrayBuffer());
      if (takeTheRoom && request.method === "DELETE" && request.url?.startsWith("/v1/api-keys/")) {
        expect((await limited.api.post("/v1/api-keys", { name: "meanwhile" }, user.apiKey)).status).toBe(201);
      }
      response.writeHead(forwarded.status, { "content-type": forwarded.headers.get("content-type") ?? "" });
      response.end(body);
    });
    await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
    const proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
    try {
      const login = () =>
        svc(["login", "--email", user.email, "--base-url", proxyUrl, "--json"], {
          ...ownEnv,
          SVC_PASSWORD: user.password,
        });
      expectOk(await login());
      takeTheRoom = true;
      const endedBefore = await endedAccessTokens(limited);
      const refused = await login();
      expect(expectOneLineFailure(refused, 1)).toMatch(/too_many_api_keys/);
      // The login's access token is ended all the same.
      expect(await endedAccessTokens(limited)).toBe(endedBefore + 1);
      expect(JSON.parse(fs.readFileSync(ownEnv.SVC_CONFIG, "utf8"))).toEqual({
        baseUrl: `${proxyUrl}/v1`,
        email: user.email,
        deviceToken: expect.any(String),
      });
      expect(expectOneLineFailure(await svc(["keys", "list"], ownEnv), 2)).toBe(
        "error: No credential: run `svc login`, pass --api-key, or set SVC_API_KEY",
      );
    } finally {
      proxy.close();
      await limited.close();
      fs.rmSync(ownHome, { recursive: true, force: true });
    }
  });
});

describe("wallets, faucet and balance", () => {
  it("creates wallets with a policy, lists and shows them", async () => {
    const created = await svc(
      ["wallets", "create", "payer", "--chains", "base", "--max-per-tx", "10", "--json"],
      env,
    );
    expectOk(created);
    payer = created.json();
    expect(payer).toMatchObject({ name: "payer", chains: ["base"], status: "active" });
    expect(payer.evm.address).toMatch(/^0x[0-9a-fA-F]{40}$/);
    payee = (await svc(["wallets", "create", "payee", "--chains", "base", "--json"], env)).json();

    const listed = await svc(["wallets", "list", "--json"], env);
    expect(listed.json().map((w: { id: string }) => w.id)).toEqual([payee.id, payer.id]);
    expect((await svc(["wallets", "show", payer.id, "--json"], env)).json()).toEqual(payer);

    const human = await svc(["wallets", "list"], env);
    expectOk(human);
    const [header, ...rows] = human.stdout.trimEnd().split("\n");
    expect(header).toMatch(/^ID\s+NAME\s+CHAINS\s+STATUS\s+CREATED$/);
    // Aligned: every row's name starts under the heading's NAME.
    const nameColumn = (header as string).indexOf("NAME");
    for (const row of rows) expect(row.slice(nameColumn)).toMatch(/^pay(er|ee)\s/);
  });

  it("bin/svc.js (the installed `svc`, tsx compiling the sources) answers as the build the tests run", async () => {
    const fromBin = await svcFromBin(["wallets", "list"], env);
    expectOk(fromBin);
    expect(fromBin).toEqual({ ...(await svc(["wallets", "list"], env)), json: expect.any(Function) });
    const usage = await svcFromBin(["wallets", "frobnicate"], env);
    expect(expectOneLineFailure(usage, 1)).toMatch(/unknown command/);
  });

  it("the faucet funds the payer, and balance shows it", async () => {
    const gas = await svc(["faucet", payer.id, "--token", "ETH", "--amount", "0.01", "--json"], env);
    expectOk(gas);
    expect(gas.json()).toMatchObject({ type: "receive", token: "ETH", amount: "0.01", status: "confirmed" });
    const usdc = await svc(["faucet", payer.id, "--amount", "100", "--json"], env);
    expectOk(usdc);
    expect(usdc.json()).toMatchObject({ type: "receive", token: "USDC", amount: "100", chain: "base" });

    const balance = (await svc(["balance", payer.id, "--json"], env)).json();
    expect(balance.walletId).toBe(payer.id);
    expect(balance.balances).toContainEqual(
      expect.objectContaining({ chain: "base", token: "USDC", amount: "100" }),
    );

    const human = await svc(["balance", payer.id], env);
    expectOk(human);
    expect(human.stdout).toMatch(/^CHAIN\s+TOKEN\s+AMOUNT\s+USD$/m);
    expect(human.stdout).toMatch(/^base\s+USDC\s+100\s+\$100\.00$/m);
    expect(human.stdout).toMatch(/^Total \$\d+\.\d{2,}$/m);
  });
});

describe("svc send", () => {
  it("sends within the policy and waits until the chain confirms it", async () => {
    const run = await svc(["send", payer.id, payee.evm.address, "1.5", "--json"], env);
    expectOk(run);
    const tx = run.json();
    expect(tx).toMatchObject({
      type: "send",
      status: "confirmed",
      amount: "1.5",
      token: "USDC",
      chain: "base",
      to: payee.evm.address,
      walletId: payer.id,
    });
    expect(tx.txHash).toMatch(/^0x[0-9a-f]{64}$/);
    // The API's object as it is: with the fee the send paid in the chain's native coin.
    expect(tx.fee).toEqual({ amount: expect.stringMatching(/^0\.\d+$/), token: "ETH" });
    // Not a TTY: no spinner, nothing on stderr.
    expect(run.stderr).toBe("");
    const payeeBalance = (await svc(["balance", payee.id, "--json"], env)).json();
    expect(payeeBalance.balances).toContainEqual(expect.objectContaining({ token: "USDC", amount: "1.5" }));
  });

  it("a send over maxPerTx: exit 3, the policy's message and request id on one line, nothing moved", async () => {
    const run = await svc(["send", payer.id, payee.evm.address, "25"], env);
    const line = expectOneLineFailure(run, 3);
    expect(line).toMatch(
      /^error: Per-transaction limit of \$10\.00 exceeded: this spend is \$25\.00 \(PolicyViolation max_per_tx, request req_\w+\)$/,
    );
    const json = await svc(["send", payer.id, payee.evm.address, "25", "--json"], env);
    expect(json.code).toBe(3);
    expect(JSON.parse(json.stderr)).toEqual({
      error: expect.objectContaining({
        code: "PolicyViolation",
        reason: "max_per_tx",
        requestId: expect.any(String),
      }),
    });
    // --verbose: the same first line, then the status and the policy's numbers.
    const verbose = await svc(["send", payer.id, payee.evm.address, "25", "--verbose"], env);
    expect(verbose.code).toBe(3);
    const [first, ...more] = verbose.stderr.trimEnd().split("\n");
    expect(first).toBe(line.replace(/req_\w+/, (first ?? "").match(/req_\w+/)?.[0] ?? ""));
    expect(more).toEqual([
      "  status: 403",
      expect.stringMatching(/^ {2}details: \{"rule":"maxPerTx","limit":"10\.00","requested":"25\.00"/),
    ]);
    const history = (await svc(["history", payer.id, "--type", "send", "--json"], env)).json();
    expect(history.total).toBe(1);
  });

  it("an amount with more decimals than the token has: exit 1 before any request", async () => {
    const line = expectOneLineFailure(await svc(["send", payer.id, payee.evm.address, "0.0000001"], env), 1);
    expect(line).toMatch(/^error: .*decimals/);
  });

  it("history lists the send and the faucet receipts, newest first", async () => {
    const page = (await svc(["history", payer.id, "--json"], env)).json();
    expect(page).toMatchObject({ total: 3, offset: 0, limit: 20 });
    expect(page.data.map((tx: { type: string; token: string }) => `${tx.type} ${tx.token}`).sort()).toEqual([
      "receive ETH",
      "receive USDC",
      "send USDC",
    ]);
    const human = await svc(["history", payer.id], env);
    expect(human.stdout).toMatch(/^TIME\s+TYPE\s+STATUS\s+AMOUNT\s+FEE\s+CHAIN\s+COUNTERPARTY\s+ID$/m);
    // The send with the fee the API states for it; the receives paid none, and show none.
    const sent = page.data.find((tx: { type: string }) => tx.type === "send");
    expect(sent.fee.token).toBe("ETH");
    expect(human.stdout).toMatch(
      new RegExp(
        `send\\s+confirmed\\s+-1\\.5 USDC\\s+${sent.fee.amount.replace(".", "\\.")} ETH\\s+base\\s+0x`,
      ),
    );
    expect(human.stdout).toMatch(/receive\s+confirmed\s+\+100 USDC\s+base\s+0x/);
    expect(human.stdout).toMatch(/receive\s+confirmed\s+\+0\.01 ETH\s+base\s+0x/);
    expect(human.stdout).toMatch(/^1–3 of 3$/m);
  });
});

describe("svc policy and approvals", () => {
  it("shows, sets, pauses and resumes the policy", async () => {
    expect((await svc(["policy", "show", payer.id, "--json"], env)).json()).toMatchObject({
      walletId: payer.id,
      maxPerTx: "10",
      dailyLimit: null,
      status: "active",
    });
    const set = await svc(
      ["policy", "set", payer.id, "--daily-limit", "50", "--approval-above", "5", "--json"],
      env,
    );
    expectOk(set);
    expect(set.json()).toMatchObject({ maxPerTx: "10", dailyLimit: "50", approvalAbove: "5" });
    const human = await svc(["policy", "show", payer.id], env);
    expect(human.stdout).toMatch(/^max per transaction\s+\$10\.00$/m);
    expect(human.stdout).toMatch(/^daily limit\s+\$50\.00$/m);

    expect((await svc(["policy", "pause", payer.id, "--json"], env)).json()).toMatchObject({
      status: "paused",
    });
    const refused = expectOneLineFailure(await svc(["send", payer.id, payee.evm.address, "1"], env), 3);
    expect(refused).toMatch(/PolicyViolation policy_paused/);
    expect((await svc(["policy", "resume", payer.id, "--json"], env)).json()).toMatchObject({
      status: "active",
    });

    // none lifts a bound (it was sent as "", refused).
    expectOk(await svc(["policy", "set", payer.id, "--alert-above", "3"], env));
    const lifted = await svc(["policy", "set", payer.id, "--alert-above", "none", "--json"], env);
    expectOk(lifted);
    expect(lifted.json()).toMatchObject({ alertAbove: null, approvalAbove: "5", dailyLimit: "50" });

    const nothing = await svc(["policy", "set", payer.id], env);
    expectOneLineFailure(nothing, 1);
  });

  it("a spend above approvalAbove is held; approve sends it, reject ends it", async () => {
    const held = await svc(["send", payer.id, payee.evm.address, "6", "--json"], env);
    expectOk(held);
    const first = held.json();
    expect(first.status).toBe("pending_approval");
    const second = (await svc(["send", payer.id, payee.evm.address, "7", "--json"], env)).json();

    const waiting = (await svc(["approvals", "list", "--json"], env)).json();
    expect(waiting.map((tx: { id: string }) => tx.id)).toEqual([first.id, second.id]);
    expect(waiting[0]).toMatchObject({
      amount: "6",
      status: "pending_approval",
      expiresAt: expect.any(String),
    });

    // Approved, the spend is shown as it landed: its hash and the fee it paid, as the API states them.
    const approved = await svc(["approvals", "approve", first.id], env);
    expectOk(approved);
    const landed = (await server.api.get(`/v1/transactions/${first.id}`, owner.apiKey)).body;
    expect(landed).toMatchObject({ status: "confirmed", txHash: expect.any(String), fee: { token: "ETH" } });
    const shown = approved.stdout.trimEnd().split("\n");
    expect(shown[0]).toBe(`Approved ${first.id}: confirmed`);
    expect(shown).toContain(`fee          ${landed.fee.amount} ETH`);
    expect(shown).toContain(`hash         ${landed.txHash}`);
    const rejected = await svc(["approvals", "reject", second.id, "--json"], env);
    expectOk(rejected);
    expect(rejected.json()).toMatchObject({ id: second.id, status: "rejected" });
    // Nothing was sent: no fee.
    expect(rejected.json().fee).toBeUndefined();

    const again = expectOneLineFailure(await svc(["approvals", "approve", second.id], env), 1);
    expect(again).toMatch(/ValidationError already_decided/);
    expect((await svc(["approvals", "list", "--json"], env)).json()).toEqual([]);
  });
});

describe("svc keys", () => {
  it("creates an agent key bound to a wallet; it cannot loosen the policy; revoked it answers exit 2", async () => {
    const created = await svc(
      ["keys", "create", "agent one", "--role", "agent", "--wallets", payer.id, "--json"],
      env,
    );
    expectOk(created);
    const agent = created.json();
    expect(agent).toMatchObject({
      name: "agent one",
      role: "agent",
      walletIds: [payer.id],
      key: expect.stringMatching(/^svc_/),
    });
    const listed = (await svc(["keys", "list", "--json"], env)).json();
    expect(listed.find((key: { id: string }) => key.id === agent.id)).not.toHaveProperty("key");

    // Flag beats the config file: the agent key sees only its wallet.
    const byFlag = await svc(["wallets", "list", "--api-key", agent.key], env);
    expectOk(byFlag);
    expect(byFlag.stdout).toContain(payer.id);
    expect(byFlag.stdout).not.toContain(payee.id);
    // A key on the command line is in the process list (ps) for every user of the machine: said on stderr,
    // without the key. With --json stderr is left to the failure's JSON.
    expect(byFlag.stderr).toMatch(/^warning: --api-key shows the key in the process list.*SVC_API_KEY/);
    expect(byFlag.stderr).not.toContain(agent.key);
    const asAgent = (args: string[]) => svc(args, { ...env, SVC_API_KEY: agent.key });
    expect((await asAgent(["wallets", "list", "--json"])).json().map((w: { id: string }) => w.id)).toEqual([
      payer.id,
    ]);
    const loosen = expectOneLineFailure(await asAgent(["policy", "set", payer.id, "--max-per-tx", "500"]), 2);
    expect(loosen).toMatch(/Forbidden insufficient_role/);
    expect((await asAgent(["policy", "set", payer.id, "--max-per-tx", "9", "--json"])).json()).toMatchObject({
      maxPerTx: "9",
    });
    // The environment beats the config file too, and is not warned about.
    const viaEnv = await svc(["wallets", "list"], { ...env, SVC_API_KEY: agent.key });
    expect(viaEnv.stderr).toBe("");

    expectOk(await svc(["keys", "revoke", agent.id], env));
    const revoked = expectOneLineFailure(await asAgent(["wallets", "list"]), 2);
    expect(revoked).toMatch(/\(Unauthorized key_revoked, request req_\w+\)$/);
  });

  it("a bad key: exit 2 with the service's message, no stack trace, even with --json", async () => {
    const bad = `svc_${"x".repeat(40)}`;
    const line = expectOneLineFailure(await svc(["wallets", "list"], { ...env, SVC_API_KEY: bad }), 2);
    expect(line).toMatch(/^error: .+ \(Unauthorized invalid_credentials, request req_\w+\)$/);
    expect(line).not.toContain(bad);
    const json = await svc(["wallets", "list", "--api-key", bad, "--json"], env);
    expect(json.code).toBe(2);
    expect(JSON.parse(json.stderr).error).toMatchObject({ code: "Unauthorized", status: 401 });
  });

  it("no credential anywhere: exit 2 saying how to get one", async () => {
    const line = expectOneLineFailure(
      await svc(["wallets", "list"], { HOME: home, SVC_CONFIG: path.join(home, "none.json") }),
      2,
    );
    expect(line).toBe("error: No credential: run `svc login`, pass --api-key, or set SVC_API_KEY");
  });

  it("the saved key goes only to the service it was saved for: another --base-url or SVC_BASE_URL gets no request", async () => {
    const elsewhere = createServer((request, response) => {
      asked.push(request.headers.authorization ?? "");
      response.writeHead(200, { "content-type": "application/json" }).end("[]");
    });
    const asked: string[] = [];
    await new Promise<void>((resolve) => elsewhere.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(elsewhere.address() as AddressInfo).port}`;
    const savedFile = path.join(home, "saved-for-one.json");
    fs.writeFileSync(savedFile, JSON.stringify({ baseUrl: `${server.url}/v1`, apiKey: owner.apiKey }), {
      mode: 0o600,
    });
    const saved = { HOME: home, SVC_CONFIG: savedFile };
    try {
      expectOk(await svc(["wallets", "list"], saved));
      for (const run of [
        await svc(["wallets", "list", "--base-url", url], saved),
        await svc(["wallets", "list"], { ...saved, SVC_BASE_URL: url }),
      ]) {
        expect(expectOneLineFailure(run, 2)).toBe(
          `error: The saved key is for ${server.url}/v1, not ${url}/v1: pass --api-key, set SVC_API_KEY, or run \`svc login\` there`,
        );
      }
      expect(asked).toEqual([]);
    } finally {
      elsewhere.close();
    }
  });

  it("svc logout revokes the saved key at the service it was saved for, whatever SVC_BASE_URL says", async () => {
    const asked: string[] = [];
    const elsewhere = createServer((request, response) => {
      asked.push(`${request.method} ${request.url}`);
      response.writeHead(204).end();
    });
    await new Promise<void>((resolve) => elsewhere.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(elsewhere.address() as AddressInfo).port}`;
    const key = await server.api.post("/v1/api-keys", { name: "saved", role: "admin" }, owner.accessToken);
    const savedFile = path.join(home, "saved-for-logout.json");
    fs.writeFileSync(
      savedFile,
      JSON.stringify({ baseUrl: `${server.url}/v1`, apiKey: key.body.key, keyId: key.body.id }),
      { mode: 0o600 },
    );
    try {
      const run = await svc(["logout", "--json"], { HOME: home, SVC_CONFIG: savedFile, SVC_BASE_URL: url });
      expectOk(run);
      expect(run.json()).toMatchObject({ keyId: key.body.id, revoked: true });
      expect(asked).toEqual([]);
      expect((await server.api.get("/v1/wallets", key.body.key)).status).toBe(401);
      // A file that names no service (written by hand, or before it saved one): its key is the local
      // service's, and is sent nowhere else.
      fs.writeFileSync(savedFile, JSON.stringify({ apiKey: "svc_keptFromElsewhere", keyId: "key_x" }), {
        mode: 0o600,
      });
      await svc(["logout", "--json"], { HOME: home, SVC_CONFIG: savedFile, SVC_BASE_URL: url });
      expect(asked).toEqual([]);
    } finally {
      elsewhere.close();
    }
  });

  it("an unknown wallet is exit 5, an unreachable service exit 6, a usage error exit 1", async () => {
    expect(expectOneLineFailure(await svc(["wallets", "show", "wal_doesnotexist"], env), 5)).toMatch(
      /NotFound/,
    );
    // A key given for that service (the saved one goes only to the service it was saved for).
    const closed = await svc(["wallets", "list", "--base-url", "http://127.0.0.1:9/v1"], {
      ...env,
      SVC_API_KEY: owner.apiKey,
    });
    expect(expectOneLineFailure(closed, 6)).toMatch(
      /^error: Could not reach the service for GET \/wallets: .*; is the service running there\? --base-url or SVC_BASE_URL names another \(ConnectionError network_error\)$/,
    );
    expect(expectOneLineFailure(await svc(["wallets", "frobnicate"], env), 1)).toMatch(/unknown command/);
    const usageJson = await svc(["send", "--json"], env);
    expect(usageJson.code).toBe(1);
    expect(JSON.parse(usageJson.stderr)).toEqual({
      error: { code: "UsageError", message: "missing required argument 'walletId'" },
    });
  });
});

describe("text from the service on a terminal", () => {
  it("is shown with its control characters written out: a wallet's name cannot drive the terminal", async () => {
    const hostile = "evil\u001b[2J\u001b[31mred\rover\u202eright-to-left\u0007";
    const created = await server.api.post("/v1/wallets", { name: hostile, chains: ["base"] }, owner.apiKey);
    expect(created.status, created.text).toBe(201);
    for (const args of [
      ["wallets", "list"],
      ["wallets", "show", created.body.id],
    ]) {
      const run = await svc(args, env);
      expectOk(run);
      for (const char of ["\u001b", "\r", "\u0007", "\u202e"]) expect(run.stdout).not.toContain(char);
      expect(run.stdout).toContain("evil\\u001b[2J\\u001b[31mred\\u000dover\\u202eright-to-left\\u0007");
    }
    // --json keeps the name as the service gave it (JSON escapes it).
    const json = await svc(["wallets", "show", created.body.id, "--json"], env);
    expect(json.json().name).toBe(hostile);
  });
});

describe("svc pay", () => {
  it("pays the local x402 demo within --max-amount and prints its body, found with svc services", async () => {
    const started = server.logs.lines.map((line) => JSON.parse(line)).find((line) => line.x402Demo);
    const { url } = started.x402Demo as { url: string };
    // A CLI user finds the URL to pay with svc services (it was only in the service's log, or a curl away).
    const listed = await svc(["services", "--json"], env);
    expectOk(listed);
    expect(listed.json<{ resource: string }[]>().map((service) => service.resource)).toContain(url);
    const human = await svc(["services", "--query", "weather"], env);
    expectOk(human);
    expect(human.stdout).toMatch(/^RESOURCE\s+NAME\s+DESCRIPTION$/m);
    expect(human.stdout).toContain(url);
    const run = await svc(["pay", payer.id, url, "--max-amount", "0.05", "--json"], env);
    expectOk(run);
    expect(run.json()).toMatchObject({
      status: 200,
      body: { city: "Lisbon", forecast: "sunny" },
      amountCharged: "0.01",
      transaction: { type: "x402", status: "confirmed", resource: url, walletId: payer.id },
    });
    const paid = await svc(["pay", payer.id, url], env);
    expectOk(paid);
    expect(JSON.parse(paid.stdout)).toMatchObject({ city: "Lisbon" });
    expect(paid.stderr).toMatch(/^Paid 0\.01 USDC on base \(tx_\w+, confirmed, 0x[0-9a-f]{64}\)\n$/);

    // Dearer than --max-amount: refused before anything is signed (400 max_amount_exceeded), nothing paid.
    const before = (await svc(["history", payer.id, "--type", "x402", "--json"], env)).json().total;
    const dear = expectOneLineFailure(await svc(["pay", payer.id, url, "--max-amount", "0.001"], env), 1);
    expect(dear).toMatch(
      /^error: Every payment the resource accepts is over maxAmount 0\.001 \(ValidationError max_amount_exceeded, request req_\w+\)$/,
    );
    expect((await svc(["history", payer.id, "--type", "x402", "--json"], env)).json().total).toBe(before);
  });
});

describe("svc wallets archive", () => {
  it("archives a wallet; a send from it is refused; restore brings it back", async () => {
    const run = await svc(["wallets", "archive", payee.id, "--json"], env);
    expectOk(run);
    expect(run.json()).toMatchObject({ id: payee.id, status: "archived" });
    const refused = expectOneLineFailure(await svc(["send", payee.id, payer.evm.address, "0.5"], env), 1);
    expect(refused).toMatch(/ValidationError wallet_archived/);
    const restored = await svc(["wallets", "restore", payee.id], env);
    expectOk(restored);
    expect(restored.stdout.trim()).toBe(`Restored ${payee.id} (payee); it spends again`);
  });
});

describe("svc webhooks", () => {
  it("registers an endpoint (secret shown once), lists its deliveries, gives it a new secret, redelivers, deletes it", async () => {
    const receiver = await new WebhookReceiver().listen();
    receiver.answer = () => 204;
    const received = receiver.requests as { body: string; headers: Record<string, string> }[];
    const { url } = receiver;
    try {
      const human = await svc(
        ["webhooks", "create", url, "--events", "wallet.archived,wallet.restored"],
        env,
      );
      expectOk(human);
      expect(human.stdout).toMatch(/^secret\s+whsec_\S+$/m);
      expect(human.stdout).toMatch(/shown this once/);
      const id = (/^id\s+(\S+)$/m.exec(human.stdout) as RegExpExecArray)[1] as string;
      const secret = (/^secret\s+(\S+)$/m.exec(human.stdout) as RegExpExecArray)[1] as string;
      const listed = await svc(["webhooks", "list", "--json"], env);
      expect(listed.json()).toEqual([
        {
          id,
          url,
          events: ["wallet.archived", "wallet.restored"],
          description: null,
          createdAt: expect.any(String),
        },
      ]);
      expect(listed.stdout).not.toContain(secret);

      // An event of a chosen type reaches the endpoint, signed with that secret; its attempt is listed.
      expectOk(await svc(["wallets", "archive", payee.id], env));
      const archived = await eventually(() => received[0], { describe: "the wallet.archived delivery" });
      const event = verifyWebhook(archived.body, archived.headers, secret);
      expect(event).toMatchObject({ type: "wallet.archived", data: { id: payee.id } });
      const eventId = archived.headers["webhook-id"] as string;
      const attempts = await eventually(
        async () => {
          const run = await svc(["webhooks", "deliveries", id, "--event", eventId, "--json"], env);
          return run.json().length > 0 && run.json();
        },
        { describe: "the attempt's record" },
      );
      expect(attempts).toEqual([
        expect.objectContaining({ eventId, attempt: 1, status: "succeeded", responseStatus: 204 }),
      ]);
      const table = await svc(["webhooks", "deliveries", id], env);
      expect(table.stdout).toMatch(new RegExp(`^${eventId}\\s+1\\s+succeeded\\s+204\\s`, "m"));

      // A new secret, the old one stopped at once (leaked): a redelivery verifies with the new one only.
      const rotated = await svc(
        ["webhooks", "rotate-secret", id, "--previous-valid-for", "0", "--json"],
        env,
      );
      expectOk(rotated);
      const { secret: newSecret, previousSecretExpiresAt } = rotated.json();
      expect(newSecret).toMatch(/^whsec_/);
      expect(newSecret).not.toBe(secret);
      expect(previousSecretExpiresAt).toBeNull();
      expectOk(await svc(["webhooks", "redeliver", id, eventId], env));
      const again = await eventually(() => received[1], { describe: "the redelivery" });
      expect(again.headers["webhook-id"]).toBe(eventId);
      expect(verifyWebhook(again.body, again.headers, newSecret)).toMatchObject({ type: "wallet.archived" });
      expect(() => verifyWebhook(again.body, again.headers, secret)).toThrow();

      // Bad input is refused before any request.
      expectOneLineFailure(await svc(["webhooks", "create", url, "--events", "wallet.archivd"], env), 1);
      expectOneLineFailure(
        await svc(["webhooks", "rotate-secret", id, "--previous-valid-for", "604801"], env),
        1,
      );

      const deleted = await svc(["webhooks", "delete", id], env);
      expect(deleted.stdout.trim()).toBe(`Deleted ${id}`);
      expect((await svc(["webhooks", "list"], env)).stdout.trim()).toBe("No webhook endpoints");
    } finally {
      expectOk(await svc(["wallets", "restore", payee.id], env));
      await receiver.close();
    }
  });
});

describe("svc send --timeout", () => {
  it("a send still pending when --timeout runs out: exit 8, one line naming the transaction", async () => {
    const { evm } = await sharedDevnet();
    const rpc = async (method: string, params: unknown[] = []) => {
      const response = await fetch(evm.rpcUrl, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
      });
      const body = (await response.json()) as { error?: unknown };
      if (body.error) throw new Error(`${method}: ${JSON.stringify(body.error)}`);
    };
    // No block is mined while automine is off (nor the devnet's idle ones): the broadcast transaction stays
    // pending, whatever the clock.
    await rpc("evm_setIntervalMining", [0]);
    await rpc("evm_setAutomine", [false]);
    let run: Run;
    try {
      run = await svc(["send", payer.id, payee.evm.address, "0.5", "--timeout", "1"], env);
    } finally {
      await rpc("evm_setAutomine", [true]);
      await rpc("evm_setIntervalMining", [IDLE_BLOCK_SECONDS]);
      await rpc("evm_mine");
    }
    const line = expectOneLineFailure(run, 8);
    expect(line).toMatch(/^error: Transaction tx_\w+ was still pending after 1000 ms .*\(WaitTimeout/);
  });
});

describe("svc register and logout", () => {
  const email = `cli-new-${Date.now()}@example.com`;
  const password = "a new long passphrase";
  let ownEnv: Record<string, string>;
  beforeAll(() => {
    ownEnv = { HOME: home, SVC_CONFIG: path.join(home, "register", "svc.json") };
  });

  it("registers with the password on stdin (--password-stdin), never printing it; then logs in", async () => {
    const run = await svc(
      ["register", "--email", email, "--name", "Ada", "--password-stdin", "--base-url", server.url, "--json"],
      ownEnv,
      `${password}\n`,
    );
    expectOk(run);
    expect(run.json()).toEqual({
      userId: expect.stringMatching(/^usr_/),
      email,
      name: "Ada",
      createdAt: expect.any(String),
      baseUrl: `${server.url}/v1`,
    });
    expect(run.stdout + run.stderr).not.toContain(password);
    const human = await svc(
      ["register", "--email", `x${email}`, "--password-stdin", "--base-url", server.url],
      ownEnv,
      `${password}\n`,
    );
    expectOk(human);
    expect(human.stdout).toMatch(
      new RegExp(
        `^Registered x${email} \\(usr_\\w+\\) at ${server.url}/v1\\nLog in with: svc login --email x${email}\\n$`,
      ),
    );
    const login = await svc(
      ["login", "--email", email, "--base-url", server.url, "--json"],
      ownEnv,
      `${password}\n`,
    );
    expectOk(login);
    expect(login.json()).toMatchObject({ email, baseUrl: `${server.url}/v1` });
  });

  it("refuses without a terminal or --password-stdin (exit 1), and a taken email with the service's message", async () => {
    const noTerminal = await svc(
      ["register", "--email", `y${email}`, "--base-url", server.url],
      ownEnv,
      `${password}\n`,
    );
    expect(expectOneLineFailure(noTerminal, 1)).toBe(
      "error: register needs a terminal to ask the password, or --password-stdin",
    );
    const taken = await svc(
      ["register", "--email", email, "--password-stdin", "--base-url", server.url],
      ownEnv,
      `${password}\n`,
    );
    expect(expectOneLineFailure(taken, 1)).toMatch(
      /^error: .+ \(ValidationError email_taken, request req_\w+\)$/,
    );
  });

  it("logs out: the file's key is revoked and removed, the base URL and device token kept; again, nothing to do", async () => {
    const saved = JSON.parse(fs.readFileSync(ownEnv.SVC_CONFIG as string, "utf8"));
    expect(saved.apiKey).toMatch(/^svc_/);
    const run = await svc(["logout", "--json"], ownEnv);
    expectOk(run);
    expect(run.json()).toEqual({ configFile: ownEnv.SVC_CONFIG, keyId: saved.keyId, revoked: true });
    expect(JSON.parse(fs.readFileSync(ownEnv.SVC_CONFIG as string, "utf8"))).toEqual({
      baseUrl: saved.baseUrl,
      deviceToken: saved.deviceToken,
    });
    expect(fs.statSync(ownEnv.SVC_CONFIG as string).mode & 0o777).toBe(0o600);
    expect(expectOneLineFailure(await svc(["wallets", "list"], ownEnv), 2)).toBe(
      "error: No credential: run `svc login`, pass --api-key, or set SVC_API_KEY",
    );
    const oldKey = await svc(["wallets", "list"], { ...ownEnv, SVC_API_KEY: saved.apiKey });
    expect(expectOneLineFailure(oldKey, 2)).toMatch(/key_revoked/);
    const again = await svc(["logout"], ownEnv);
    expectOk(again);
    expect(again.stdout).toBe(`Not logged in: ${ownEnv.SVC_CONFIG} holds no key\n`);
  });
});
