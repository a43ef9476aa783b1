import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { lstatSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { address } from "@solana/kit";
import { findAssociatedTokenPda, TOKEN_PROGRAM_ADDRESS } from "@solana-program/token";
import { fundEvm, fundSolana } from "@svc/devnet";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { loadConfig } from "../src/internal/config.ts";
import { createTokenProgramAccount, mainnetProfileOnLocalChains } from "./support/chains.ts";
import { eventually } from "./support/eventually.ts";
import { freePort, startServiceProcess } from "./support/service-process.ts";
import { StallingProxy } from "./support/stalling-proxy.ts";
import {
  type ApiClient,
  type ApiResponse,
  createTestServer,
  expectErrorShape,
  STORE_KIND,
  seedAccount,
  sharedDevnet,
  type TestServer,
} from "./support/test-server.ts";

/** Security fixes of issue 8: each `describe` is one fix, each test fails without it. */

const USDC = 1_000_000n;
const ETH = 10n ** 18n;
const SOL = 1_000_000_000n;

type Devnet = Awaited<ReturnType<typeof sharedDevnet>>;
let devnet: Devnet;
let server: TestServer;
let apiKey: string;

beforeAll(async () => {
  devnet = await sharedDevnet();
  server = await createTestServer();
  ({ apiKey } = await seedAccount(server.api));
});
afterAll(() => server.close());

async function createWallet(api: ApiClient, key: string, body: Record<string, unknown> = {}) {
  const response = await api.post("/v1/wallets", { name: "sec", chains: ["base", "solana"], ...body }, key);
  if (response.status !== 201) throw new Error(response.text);
  return response.body as { id: string; evm: { address: `0x${string}` }; solana: { address: string } };
}

async function fundedWallet() {
  const wallet = await createWallet(server.api, apiKey);
  await fundEvm(devnet, wallet.evm.address, { eth: ETH, usdc: 500n * USDC });
  await fundSolana(devnet, wallet.solana.address as never, { sol: 2n * SOL, usdc: 500n * USDC });
  return wallet;
}

async function history(api: ApiClient, key: string, walletId: string, type: "send" | "receive") {
  const response = await api.get(`/v1/wallets/${walletId}/transactions?type=${type}`, key);
  expect(response.status, response.text).toBe(200);
  return response.body.data as Record<string, string>[];
}

function expectValidationError(response: ApiResponse, reason?: string, status = 400) {
  expect(response.status, response.text).toBe(status);
  const error = expectErrorShape(response);
  expect(error.code).toBe("ValidationError");
  if (reason) expect(error.reason).toBe(reason);
  return error;
}

const rawPost = (api: ApiClient, path: string, raw: string, key: string, method = "POST") =>
  api.request(method, path, { token: key, rawBody: raw, headers: { "content-type": "application/json" } });

// Each service here runs on PGlite in its data directory whatever store the suite is on: once, in the
// embedded run.
describe.skipIf(STORE_KIND === "postgres")("data directory permissions", () => {
  /** Every path under `root` with a mode other than 0700 (directories) or 0600 (files). */
  function looseModes(root: string): string[] {
    const loose: string[] = [];
    const walk = (path: string) => {
      const stat = lstatSync(path);
      if (stat.isSymbolicLink()) return;
      const mode = stat.mode & 0o777;
      if (stat.isDirectory()) {
        if (mode !== 0o700) loose.push(`${path} ${mode.toString(8)}`);
        for (const entry of readdirSync(path)) walk(join(path, entry));
      } else if (mode !== 0o600) loose.push(`${path} ${mode.toString(8)}`);
    };
    walk(root);
    return loose;
  }

  /** `npm start` under umask 022, on PGlite in `dataDir`, against the file's devnet. */
  function startUnderUmask022(dataDir: string, env: Record<string, string>) {
    return startServiceProcess({
      umask: "022",
      startTimeoutMs: 180_000,
      env: {
        // PGlite in the data directory, whichever store the suite runs on.
        DATABASE_URL: "",
        ...env,
        SVC_DATA_DIR: dataDir,
        LOG_LEVEL: "warn",
        SVC_RPC_BASE: devnet.evm.rpcUrl,
        SVC_USDC_BASE: devnet.evm.usdc,
        SVC_RPC_SOLANA: devnet.solana.rpcUrl,
        SVC_USDC_SOLANA: devnet.solana.usdcMint,
      },
    });
  }

  it.each([
    ["generated into the data directory", {}],
    [
      "given by the environment",
      {
        SVC_MASTER_KEY: randomBytes(32).toString("base64"),
        SVC_JWT_SECRET: randomBytes(32).toString("hex"),
      },
    ],
  ])(
    "keeps the data directory 0700 / 0600 under umask 022, secrets %s, after start-up, writes and stop",
    async (_how, env) => {
      const parent = mkdtempSync(join(tmpdir(), "svc-perm-"));
      const dataDir = join(parent, "data");
      try {
        const service = await startUnderUmask022(dataDir, env);
        try {
          expect(looseModes(dataDir)).toEqual([]);
          const account = await seedAccount(service.api);
          const wallet = await createWallet(service.api, account.apiKey, { metadata: { team: "x" } });
          const patched = await service.api.request("PATCH", `/v1/wallets/${wallet.id}/policy`, {
            token: account.apiKey,
            body: { maxPerTx: "5", whitelist: [wallet.evm.address] },
          });
          expect(patched.status).toBe(200);
          expect(looseModes(dataDir)).toEqual([]);
        } finally {
          await service.stop();
        }
        expect(looseModes(dataDir)).toEqual([]);
      } finally {
        rmSync(parent, { recursive: true, force: true });
      }
    },
    // Two processes start PGlite from scratch; on a loaded machine that alone can take a minute.
    240_000,
  );
});

describe("rate limits never fail open", () => {
  it("counts in the process while REDIS_URL points at a closed port, warning once", async () => {
    const port = await freePort();
    const limited = await createTestServer({
      env: {
        REDIS_URL: `redis://127.0.0.1:${port}`,
        SVC_RATE_LIMIT_PER_ADDRESS_PER_MINUTE: "4",
      },
    });
    try {
      const statuses = [];
      for (let i = 0; i < 6; i++) statuses.push((await limited.api.get("/healthz")).status);
      expect(statuses).toEqual([200, 200, 200, 200, 429, 429]);
      const warnings = limited.logs.lines.filter((line) => line.includes("rate limiter unavailable"));
      expect(warnings).toHaveLength(1);
    } finally {
      await limited.close();
    }
  });

  it("keeps limiting logins while Redis is down", async () => {
    const port = await freePort();
    const limited = await createTestServer({
      env: { REDIS_URL: `redis://127.0.0.1:${port}`, SVC_LOGIN_LIMIT_PER_MINUTE: "3" },
    });
    try {
      const email = `guess-${randomBytes(4).toString("hex")}@example.com`;
      const statuses = [];
      for (let i = 0; i < 5; i++) {
        statuses.push((await limited.api.post("/v1/auth/login", { email, password: `wrong-${i}` })).status);
      }
      expect(statuses).toEqual([401, 401, 401, 429, 429]);
    } finally {
      await limited.close();
    }
  });

  it("falls back to counting in the process when Redis stops mid-run", async () => {
    const port = await freePort();
    const redis = spawn("redis-server", ["--port", String(port), "--save", "", "--appendonly", "no"], {
      stdio: "ignore",
    });
    onTestFinished(() => {
      redis.kill("SIGKILL");
    });
    const redisExited = new Promise<void>((resolve) => redis.once("exit", () => resolve()));
    try {
      const limited = await createTestServer({
        env: { REDIS_URL: `redis://127.0.0.1:${port}`, SVC_RATE_LIMIT_PER_ADDRESS_PER_MINUTE: "6" },
      });
      try {
        // Counted in Redis while it runs (the server may need a moment to reach it: retry until one passes).
        await eventually(async () => ((await limited.api.get("/healthz")).status === 200 ? true : undefined));
        redis.kill("SIGKILL");
        await redisExited;
        const statuses = [];
        for (let i = 0; i < 8; i++) statuses.push((await limited.api.get("/healthz")).status);
        // From the outage on, the process counts on its own: 6 pass, then 429.
        expect(statuses).toEqual([200, 200, 200, 200, 200, 200, 429, 429]);
      } finally {
        await limited.close();
      }
    } finally {
      redis.kill("SIGKILL");
    }
  });
});

describe("rate limits when Redis stops answering", () => {
  it("keeps limiting in the process while Redis holds every reply, and counts in Redis again once it answers", async () => {
    // The machine's Redis behind a proxy that can stall; a database of its own, away from other tests' keys.
    const proxy = await StallingProxy.start({ host: "127.0.0.1", port: 6379 });
    const redis = new Redis("redis://127.0.0.1:6379/9", { lazyConnect: true, maxRetriesPerRequest: 1 });
    const limited = await createTestServer({
      env: { REDIS_URL: `redis://127.0.0.1:${proxy.port}/9`, SVC_RATE_LIMIT_PER_MINUTE: "5" },
    });
    try {
      await redis.connect();
      const { apiKey, apiKeyId } = await seedAccount(limited.api);
      const counted = async () => Number((await redis.get(`svc:ratelimit:cred:key:${apiKeyId}`)) ?? 0);
      const get = async () => (await limited.api.get("/v1/wallets", apiKey)).status;
      expect([await get(), await get()]).toEqual([200, 200]);
      expect(await counted()).toBe(2); // counted in Redis while it answers

      proxy.stall();
      const statuses = [];
      for (let i = 0; i < 7; i++) statuses.push(await get());
      // Every request is answered; the process counts from its own zero, so the limit of 5 holds: never
      // fails open (no 8th, 9th… pass), never fails shut (no 5xx).
      expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429]);
      const unavailable = () => limited.logs.lines.filter((l) => l.includes("rate limiter unavailable"));
      expect(unavailable()).toHaveLength(1);

      proxy.resume();
      // Redis is tried again 5 s into the outage, by the service's clock.
      limited.clock.advance(5_000);
      await eventually(
        async () => {
          await limited.api.get("/healthz");
          return limited.logs.lines.some((l) => l.includes("shared rate limiter answering again"));
        },
        { intervalMs: 250, describe: "the limiter to count in Redis again" },
      );
      const before = await counted();
      await get();
      expect(await counted()).toBe(before + 1);
      expect(unavailable()).toHaveLength(1);
    } finally {
      await limited.close();
      redis.disconnect();
      await proxy.close();
    }
  });
});

describe("per-credential limit", () => {
  it("counts every spelling of one credential's Authorization header in one budget", async () => {
    const limited = await createTestServer({ env: { SVC_RATE_LIMIT_PER_MINUTE: "6" } });
    try {
      const account = await seedAccount(limited.api);
      const spellings = [`bearer ${account.apiKey}`, `BEARER ${account.apiKey}`, `Bearer  ${account.apiKey}`];
      const statuses = [];
      for (let i = 0; i < 7; i++) {
        const response = await limited.api.request("GET", "/v1/wallets", {
          headers: { authorization: spellings[i % 3] as string },
        });
        statuses.push(response.status);
      }
      expect(statuses).toEqual([200, 200, 200, 200, 200, 200, 429]);

      // An access token counts for its account, whatever the spelling too (seedAccount used it once).
      const tokenStatuses = [];
      for (let i = 0; i < 6; i++) {
        const spelling = [`bearer ${account.accessToken}`, `Bearer   ${account.accessToken}`][
          i % 2
        ] as string;
        tokenStatuses.push(
          (await limited.api.request("GET", "/v1/wallets", { headers: { authorization: spelling } })).status,
        );
      }
      expect(tokenStatuses).toEqual([200, 200, 200, 200, 200, 429]);
    } finally {
      await limited.close();
    }
  });
});

describe("registration limit", () => {
  it("limits registrations per client address with 429, refused attempts included", async () => {
    const limited = await createTestServer({ env: { SVC_REGISTER_LIMIT_PER_MINUTE: "3" } });
    try {
      const register = (body: unknown) => limited.api.post("/v1/auth/register", body);
      const email = () => `reg-${randomBytes(4).toString("hex")}@example.com`;
      const password = "correct horse battery";
      expect((await register({ email: email(), password })).status).toBe(201);
      expect((await register({ email: "not an email", password })).status).toBe(400);
      expect((await register({ email: email(), password })).status).toBe(201);
      const refused = await register({ email: email(), password });
      expect(refused.status).toBe(429);
      expect(expectErrorShape(refused)).toMatchObject({
        code: "RateLimitExceeded",
        details: { scope: "registration" },
      });
      expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
    } finally {
      await limited.close();
    }
  });
});

describe("NUL and lone surrogates", () => {
  it("refuses them with 400 in every kind of string field, before anything is stored", async () => {
    const wallet = await createWallet(server.api, apiKey);
    const walletsBefore = (await server.api.get("/v1/wallets", apiKey)).body.length;
    const secret = `pw-${randomBytes(8).toString("hex")}`;
    const cases: [string, () => Promise<ApiResponse>][] = [
      [
        "register email",
        () => server.api.post("/v1/auth/register", { email: "a\u0000b@example.com", password: secret }),
      ],
      [
        "register password",
        () =>
          server.api.post("/v1/auth/register", {
            email: `n-${Date.now()}@example.com`,
            password: `${secret}\u0000`,
          }),
      ],
      [
        "register name",
        () =>
          server.api.post("/v1/auth/register", {
            email: `n-${Date.now()}@example.com`,
            password: secret,
            name: "a\ud800",
          }),
      ],
      [
        "login email",
        () => server.api.post("/v1/auth/login", { email: "x\u0000@example.com", password: secret }),
      ],
      [
        "login password",
        () => server.api.post("/v1/auth/login", { email: "x@example.com", password: `\udc00${secret}` }),
      ],
      ["wallet name", () => server.api.post("/v1/wallets", { name: "w\u0000", chains: ["base"] }, apiKey)],
      [
        "wallet name surrogate",
        () => server.api.post("/v1/wallets", { name: "w\ud83d", chains: ["base"] }, apiKey),
      ],
      [
        "metadata key",
        () =>
          server.api.post("/v1/wallets", { name: "w", chains: ["base"], metadata: { "k\u0000": 1 } }, apiKey),
      ],
      [
        "deep metadata value",
        () =>
          server.api.post(
            "/v1/wallets",
            { name: "w", chains: ["base"], metadata: { a: { b: [1, "\ud800x"] } } },
            apiKey,
          ),
      ],
      [
        "wallet whitelist",
        () =>
          server.api.post(
            "/v1/wallets",
            { name: "w", chains: ["base"], policy: { whitelist: ["0x\u0000"] } },
            apiKey,
          ),
      ],
      [
        "policy whitelist",
        () =>
          server.api.request("PATCH", `/v1/wallets/${wallet.id}/policy`, {
            token: apiKey,
            body: { whitelist: ["\udfff"] },
          }),
      ],
      [
        "send address",
        () =>
          server.api.post(
            `/v1/wallets/${wallet.id}/send`,
            { to: "0x\u0000", amount: "1", chain: "base" },
            apiKey,
          ),
      ],
      ["api key name", () => server.api.post("/v1/api-keys", { name: "k\u0000" }, apiKey)],
      ["query string", () => server.api.get(`/v1/wallets/${wallet.id}/transactions?chain=ba%00se`, apiKey)],
      ["path parameter", () => server.api.get("/v1/wallets/wal_abc%00", apiKey)],
      // The body parser marks inexact numbers with a marker object of its own; a client's copy of that
      // marker beside a real inexact number must not pass as one and carry a NUL past the check.
      ...(["x\\u0000y", "\\ud800"] as const).map((text): [string, () => Promise<ApiResponse>] => [
        `a client's copy of the parser's marker holding ${text}`,
        () =>
          server.api.request("POST", "/v1/wallets", {
            token: apiKey,
            rawBody: `{"name":"m","chains":["base"],"metadata":{"a":{"\\u0000svc:inexact-number":"${text}"},"b":1e1}}`,
            headers: { "content-type": "application/json" },
          }),
      ]),
    ];
    for (const [name, call] of cases) {
      const response = await call();
      expect(response.status, `${name}: ${response.text}`).toBe(400);
      expect(expectErrorShape(response).code, name).toBe("ValidationError");
      expect(response.text.includes(secret), `${name} echoes the password`).toBe(false);
    }
    expect((await server.api.get("/v1/wallets", apiKey)).body.length).toBe(walletsBefore);
    expect((await server.api.get(`/v1/wallets/${wallet.id}/policy`, apiKey)).body.whitelist).toEqual([]);
  });
});

describe("deeply nested bodies", () => {
  /** `levels` arrays around `inner`: `[[[…inner…]]]`. */
  const nested = (levels: number, inner: string) => `${"[".repeat(levels)}${inner}${"]".repeat(levels)}`;
  const post = (path: string, rawBody: string, headers: Record<string, string> = {}) =>
    server.api.request("POST", path, {
      token: apiKey,
      rawBody,
      headers: { "content-type": "application/json", ...headers },
    });

  it("refuses a body nested deeper than 64 levels with 400, before anything is stored or fetched", async () => {
    const walletsBefore = (await server.api.get("/v1/wallets", apiKey)).body.length;
    const wallet = await createWallet(server.api, apiKey);
    const cases: [string, () => Promise<ApiResponse>][] = [
      // A NUL under 70 levels of metadata was not looked for, and reached the database (500).
      [
        "NUL under 70 levels",
        () =>
          post("/v1/wallets", `{"name":"w","chains":["base"],"metadata":{"x":${nested(70, '"a\\u0000b"')}}}`),
      ],
      [
        "surrogate under 70 levels",
        () =>
          post("/v1/wallets", `{"name":"w","chains":["base"],"metadata":{"x":${nested(70, '"\\ud800"')}}}`),
      ],
      // 5,000 levels in 10 kB overflowed the stack: the message named the overflow.
      [
        "metadata 5,000 levels",
        () => post("/v1/wallets", `{"name":"w","chains":["base"],"metadata":{"x":${nested(5000, "1")}}}`),
      ],
      // A payment's request body: a 500 before, with or without an Idempotency-Key.
      ...[{}, { "idempotency-key": `deep-${randomBytes(4).toString("hex")}` }].map(
        (headers): [string, () => Promise<ApiResponse>] => [
          `x402 body 5,000 levels${"idempotency-key" in headers ? " with an Idempotency-Key" : ""}`,
          () =>
            post(
              "/v1/x402/fetch",
              `{"walletId":"${wallet.id}","url":"http://127.0.0.1:9/x","method":"POST","body":{"a":${nested(5000, "1")}}}`,
              headers,
            ),
        ],
      ),
    ];
    for (const [name, call] of cases) {
      const response = await call();
      expect(response.status, `${name}: ${response.text}`).toBe(400);
      expect(expectErrorShape(response), name).toMatchObject({
        code: "ValidationError",
        reason: "invalid_body",
        message: expect.stringMatching(/nested deeper than 64 levels/),
      });
    }
    expect((await server.api.get("/v1/wallets", apiKey)).body.length).toBe(walletsBefore + 1);
    expect((await server.api.get(`/v1/wallets/${wallet.id}/transactions`, apiKey)).body.total).toBe(0);
    // 64 levels, and brackets inside strings, are fine.
    const deepest = await post(
      "/v1/wallets",
      `{"name":"[[[{{{","chains":["base"],"metadata":{"x":${nested(62, '"]]]}}}"')}}}`,
    );
    expect(deepest.status, deepest.text).toBe(201);
  });

  it("refuses a key given twice in one object with 400 naming it: a send of amount 1 and amount 2 sent 2", async () => {
    const wallet = await fundedWallet();
    for (const rawBody of [
      '{"to":"0x1111111111111111111111111111111111111111","amount":"1","chain":"base","amount":"2"}',
      '{"to":"0x1111111111111111111111111111111111111111","amount":"1","chain":"base","\\u0061mount" : "2"}',
    ]) {
      const response = await post(`/v1/wallets/${wallet.id}/send`, rawBody);
      expect(response.status, response.text).toBe(400);
      expect(expectErrorShape(response)).toMatchObject({
        reason: "invalid_body",
        message: 'Invalid body: the key "amount" appears twice in one object',
      });
    }
    expect(await history(server.api, apiKey, wallet.id, "send")).toEqual([]);
    const nested = await post("/v1/wallets", '{"name":"w","chains":["base"],"metadata":{"a":1,"a":2}}');
    expect(nested.status).toBe(400);
    // A long key is named cut at 64 characters, not in the middle of one.
    const long = `${"k".repeat(63)}😀tail`;
    const cut = await post(
      "/v1/wallets",
      JSON.stringify({ name: "w", chains: ["base"], metadata: {} }).replace(
        "{}",
        `{"${long}":1,"${long}":2}`,
      ),
    );
    expect(expectErrorShape(cut).message).toBe(
      `Invalid body: the key "${"k".repeat(63)}😀" appears twice in one object`,
    );
    // One key in two objects, and a value spelled like a key, are fine.
    const fine = await post(
      "/v1/wallets",
      '{"name":"name","chains":["base"],"metadata":{"name":{"name":"x"},"list":["name", "name"]}}',
    );
    expect(fine.status, fine.text).toBe(201);
  });

  it("says why a body with a __proto__ key is refused: it is JSON, but its key is not accepted", async () => {
    for (const rawBody of [
      '{"name":"w","chains":["base"],"metadata":{"__proto__":{"admin":true}}}',
      '{"name":"w","chains":["base"],"metadata":{"constructor":{"prototype":{"admin":true}}}}',
    ]) {
      const response = await post("/v1/wallets", rawBody);
      expect(response.status).toBe(400);
      expect(expectErrorShape(response).message).toMatch(/__proto__.*is not accepted/);
    }
    expect(expectErrorShape(await post("/v1/wallets", '{"name":')).message).toMatch(/not valid JSON/);
  });
});

describe("JSON-number amounts are exact or refused", () => {
  const INEXACT = ["1e1", "1.00000000000000001", "0.1e1"];

  it("refuses 1e1, 1.00000000000000001 and 0.1e1 as a send amount, accepts 2.5 and 10", async () => {
    const wallet = await fundedWallet();
    const to = (await createWallet(server.api, apiKey)).evm.address;
    for (const amount of INEXACT) {
      const response = await rawPost(
        server.api,
        `/v1/wallets/${wallet.id}/send`,
        `{"to":"${to}","amount":${amount},"chain":"base","token":"USDC"}`,
        apiKey,
      );
      expectValidationError(response);
      expect(response.body.error.message).toContain(amount);
    }
    expect(await history(server.api, apiKey, wallet.id, "send")).toEqual([]);
    for (const amount of ["2.5", "10"]) {
      const response = await rawPost(
        server.api,
        `/v1/wallets/${wallet.id}/send`,
        `{"to":"${to}","amount":${amount},"chain":"base","token":"USDC"}`,
        apiKey,
      );
      expect(response.status, response.text).toBe(201);
      expect(response.body.amount).toBe(amount);
    }
    expect((await history(server.api, apiKey, wallet.id, "send")).map((t) => t.amount).sort()).toEqual([
      "10",
      "2.5",
    ]);
  });

  it("refuses them as a faucet amount (nothing paid) and accepts 2.5", async () => {
    const wallet = await createWallet(server.api, apiKey);
    for (const amount of INEXACT) {
      const response = await rawPost(
        server.api,
        `/v1/wallets/${wallet.id}/faucet`,
        `{"chain":"base","token":"USDC","amount":${amount}}`,
        apiKey,
      );
      expectValidationError(response);
    }
    expect(await history(server.api, apiKey, wallet.id, "receive")).toEqual([]);
    const paid = await rawPost(
      server.api,
      `/v1/wallets/${wallet.id}/faucet`,
      `{"chain":"base","token":"USDC","amount":2.5}`,
      apiKey,
    );
    expect(paid.status, paid.text).toBe(201);
    expect(paid.body.amount).toBe("2.5");
  });

  it("refuses them as USD policy bounds (policy unchanged) and accepts 2.5 and 10", async () => {
    const wallet = await createWallet(server.api, apiKey);
    const path = `/v1/wallets/${wallet.id}/policy`;
    for (const field of ["maxPerTx", "dailyLimit", "alertAbove"]) {
      for (const amount of INEXACT) {
        expectValidationError(await rawPost(server.api, path, `{"${field}":${amount}}`, apiKey, "PATCH"));
      }
    }
    const unchanged = (await server.api.get(path, apiKey)).body;
    expect([unchanged.maxPerTx, unchanged.dailyLimit, unchanged.alertAbove]).toEqual([null, null, null]);
    const created = await rawPost(
      server.api,
      "/v1/wallets",
      `{"name":"p","chains":["base"],"policy":{"maxPerTx":1e1}}`,
      apiKey,
    );
    expectValidationError(created);
    const updated = await rawPost(server.api, path, `{"maxPerTx":2.5,"dailyLimit":10}`, apiKey, "PATCH");
    expect(updated.status, updated.text).toBe(200);
    expect([updated.body.maxPerTx, updated.body.dailyLimit]).toEqual(["2.5", "10"]);
  });
});

describe("faucet", () => {
  it("refuses an archived wallet with 409 wallet_archived and pays nothing", async () => {
    const wallet = await createWallet(server.api, apiKey);
    expect((await server.api.delete(`/v1/wallets/${wallet.id}`, apiKey)).status).toBeLessThan(300);
    const response = await server.api.post(
      `/v1/wallets/${wallet.id}/faucet`,
      { chain: "base", token: "USDC", amount: "5" },
      apiKey,
    );
    expectValidationError(response, "wallet_archived", 409);
    expect(await history(server.api, apiKey, wallet.id, "receive")).toEqual([]);
    const chain = await server.api.get(`/v1/wallets/${wallet.id}/balance`, apiKey);
    expect(chain.body.balances.find((b: { token: string }) => b.token === "USDC").amount).toBe("0");
  });

  it("caps an account's wallets together per day, not only each wallet", async () => {
    const capped = await createTestServer({
      env: { SVC_FAUCET_DAILY_USDC: "100", SVC_FAUCET_ACCOUNT_DAILY_USDC: "250" },
    });
    try {
      const account = await seedAccount(capped.api);
      const wallets = [];
      for (let i = 0; i < 3; i++) wallets.push(await createWallet(capped.api, account.apiKey));
      const pay = (walletId: string, amount: string) =>
        capped.api.post(
          `/v1/wallets/${walletId}/faucet`,
          { chain: "base", token: "USDC", amount },
          account.apiKey,
        );
      expect((await pay(wallets[0]?.id as string, "100")).status).toBe(201);
      expect((await pay(wallets[1]?.id as string, "100")).status).toBe(201);
      const over = await pay(wallets[2]?.id as string, "100");
      const error = expectValidationError(over, "faucet_cap_exceeded");
      expect(error.details).toMatchObject({ scope: "account", cap: "250", used: "200", remaining: "50" });
      expect(await history(capped.api, account.apiKey, wallets[2]?.id as string, "receive")).toEqual([]);
      expect((await pay(wallets[2]?.id as string, "50")).status).toBe(201);
      // Another account is not affected.
      const other = await seedAccount(capped.api);
      const otherWallet = await createWallet(capped.api, other.apiKey);
      const paid = await capped.api.post(
        `/v1/wallets/${otherWallet.id}/faucet`,
        { chain: "base", token: "USDC", amount: "100" },
        other.apiKey,
      );
      expect(paid.status).toBe(201);
    } finally {
      await capped.close();
    }
  });
});

describe("passwords and recipients", () => {
  it("refuses a password of only whitespace with 400 weak_password", async () => {
    for (const password of [" ".repeat(12), "\t \n ".repeat(4), "\u00a0".repeat(12)]) {
      const response = await server.api.post("/v1/auth/register", {
        email: `ws-${randomBytes(4).toString("hex")}@example.com`,
        password,
      });
      expectValidationError(response, "weak_password");
    }
  });

  it("refuses a send where whatever is sent is lost (the zero address, precompiles, a token's own contract or mint) with 400 invalid_address, signing nothing", async () => {
    const wallet = await fundedWallet();
    for (const [chain, to, named] of [
      ["base", `0x${"0".repeat(40)}`, "the zero address"],
      ["solana", "11111111111111111111111111111111", "the zero address"],
      ["base", devnet.evm.usdc.toLowerCase(), "the USDC contract"],
      ["solana", devnet.solana.usdcMint, "the USDC mint"],
      // Precompiles: sent there, ETH and tokens stay for good (found by an attack review: a send to 0x…01 landed).
      ["base", "0x0000000000000000000000000000000000000001", "a precompiled contract"],
      ["base", "0x0000000000000000000000000000000000000100", "a precompiled contract"],
      // Wrapped SOL's mint, where the local cluster keeps no account to tell it by (a send there landed).
      ["solana", "So11111111111111111111111111111111111111112", "the wrapped SOL mint"],
    ] as const) {
      for (const token of chain === "base" ? ["USDC", "ETH"] : ["USDC", "SOL"]) {
        const response = await server.api.post(
          `/v1/wallets/${wallet.id}/send`,
          { to, amount: "1", chain, token },
          apiKey,
        );
        const error = expectValidationError(response, "invalid_address");
        expect(error.message).toContain(named);
      }
    }
    expect(await history(server.api, apiKey, wallet.id, "send")).toEqual([]);
  });

  it("refuses USDC sent to a Solana program or sysvar with 400 invalid_address: a token account owned by it was created and filled, and lost", async () => {
    const wallet = await fundedWallet();
    for (const to of [
      "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA",
      "ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL",
      "SysvarRent111111111111111111111111111111111",
      "SysvarC1ock11111111111111111111111111111111",
      // Addresses the cluster keeps no account at: known all the same.
      "Sysvar1nstructions1111111111111111111111111",
      "Sysvar1111111111111111111111111111111111111",
      "NativeLoader1111111111111111111111111111111",
    ]) {
      const response = await server.api.post(
        `/v1/wallets/${wallet.id}/send`,
        { to, amount: "1", chain: "solana", token: "USDC" },
        apiKey,
      );
      expect(expectValidationError(response, "invalid_address").message).toContain(
        "it is a program or sysvar of the Solana runtime",
      );
    }
    expect(await history(server.api, apiKey, wallet.id, "send")).toEqual([]);
  });

  it("refuses USDC sent to a Solana token account (its address pasted for its owner's): no token account of a token account is created", async () => {
    const wallet = await fundedWallet();
    const payee = await fundedWallet();
    const [payeeUsdcAccount] = await findAssociatedTokenPda({
      owner: address(payee.solana.address),
      mint: address(devnet.solana.usdcMint),
      tokenProgram: TOKEN_PROGRAM_ADDRESS,
    });
    const response = await server.api.post(
      `/v1/wallets/${wallet.id}/send`,
      { to: payeeUsdcAccount, amount: "1", chain: "solana", token: "USDC" },
      apiKey,
    );
    const error = expectValidationError(response, "invalid_address");
    expect(error.message).toContain("a token account");
    expect(await history(server.api, apiKey, wallet.id, "send")).toEqual([]);
    // Its owner is the recipient.
    const toOwner = await server.api.post(
      `/v1/wallets/${wallet.id}/send`,
      { to: payee.solana.address, amount: "1", chain: "solana", token: "USDC" },
      apiKey,
    );
    expect(toOwner.status, toOwner.text).toBe(201);
  });

  it("refuses USDC sent to a mint of another token, and takes a multisig, which the token program owns too but can own a token account", async () => {
    const wallet = await fundedWallet();
    const send = (to: string) =>
      server.api.post(
        `/v1/wallets/${wallet.id}/send`,
        { to, amount: "1", chain: "solana", token: "USDC" },
        apiKey,
      );
    const mint = await send(await createTokenProgramAccount(devnet, "mint"));
    expect(expectValidationError(mint, "invalid_address").message).toContain("a token mint");
    const multisig = await send(await createTokenProgramAccount(devnet, "multisig"));
    expect(multisig.status, multisig.text).toBe(201);
  });

  it("refuses, on a chain, the token contract of another served chain (an address copied from its explorer)", async () => {
    // The mainnet profile's chains on the local ones: the refusal comes before any chain call.
    const mainnet = await createTestServer({ env: mainnetProfileOnLocalChains(devnet) });
    try {
      const key = (await seedAccount(mainnet.api)).apiKey;
      const wallet = (await mainnet.api.post("/v1/wallets", { name: "w", chains: ["base"] }, key)).body;
      const ethereumUsdc = "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48";
      const response = await mainnet.api.post(
        `/v1/wallets/${wallet.id}/send`,
        { to: ethereumUsdc, amount: "1", chain: "base", token: "USDC" },
        key,
      );
      const error = expectValidationError(response, "invalid_address");
      expect(error.message).toContain("the USDC contract on ethereum");
    } finally {
      await mainnet.close();
    }
  });
});

describe("SVC_TRUST_PROXY", () => {
  it("refuses 'true' and anything but a list of addresses and CIDR ranges", () => {
    expect(() => loadConfig({ SVC_TRUST_PROXY: "true" })).toThrow(/SVC_TRUST_PROXY/);
    expect(() => loadConfig({ SVC_TRUST_PROXY: "10.0.0.0/33" })).toThrow(/SVC_TRUST_PROXY/);
    expect(loadConfig({ SVC_TRUST_PROXY: "127.0.0.1, 10.0.0.0/8,::1" }).trustProxy).toEqual([
      "127.0.0.1",
      "10.0.0.0/8",
      "::1",
    ]);
    expect(loadConfig({}).trustProxy).toEqual([]);
  });

  const forwardedStatuses = async (limited: TestServer, forwardedFor: string, count: number) => {
    const statuses = [];
    for (let i = 0; i < count; i++) {
      const response = await limited.api.request("GET", "/healthz", {
        headers: { "x-forwarded-for": forwardedFor },
      });
      statuses.push(response.status);
    }
    return statuses;
  };

  describe("with 127.0.0.1 listed", () => {
    // One service for both: each counts addresses of its own (IPv4 in one, IPv6 in the other).
    let behindProxy: TestServer;
    beforeAll(async () => {
      behindProxy = await createTestServer({
        env: { SVC_TRUST_PROXY: "127.0.0.1", SVC_RATE_LIMIT_PER_ADDRESS_PER_MINUTE: "3" },
      });
    });
    afterAll(() => behindProxy.close());

    it("counts the per-address limit by the forwarded address", async () => {
      expect(await forwardedStatuses(behindProxy, "203.0.113.7", 4)).toEqual([200, 200, 200, 429]);
      expect(await forwardedStatuses(behindProxy, "203.0.113.8", 1)).toEqual([200]);
    });

    it("counts IPv6 clients by their /64: addresses of one /64 share a budget, another /64 has its own", async () => {
      expect(await forwardedStatuses(behindProxy, "2001:db8:1:2::1", 2)).toEqual([200, 200]);
      expect(await forwardedStatuses(behindProxy, "2001:db8:1:2::2", 1)).toEqual([200]);
      expect(await forwardedStatuses(behindProxy, "2001:db8:1:2:ffff::9", 1)).toEqual([429]);
      expect(await forwardedStatuses(behindProxy, "2001:db8:1:3::1", 1)).toEqual([200]);
    });
  });

  it("unset, ignores X-Forwarded-For: every forwarded address shares the socket's budget", async () => {
    const limited = await createTestServer({ env: { SVC_RATE_LIMIT_PER_ADDRESS_PER_MINUTE: "3" } });
    try {
      expect(await forwardedStatuses(limited, "203.0.113.7", 3)).toEqual([200, 200, 200]);
      expect(await forwardedStatuses(limited, "203.0.113.8", 1)).toEqual([429]);
    } finally {
      await limited.close();
    }
  });
});
