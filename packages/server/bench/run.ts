/**
 * `npm run bench`: throughput and latency of the wallet service on loopback, on PGlite and on PostgreSQL.
 * Prints figures; asserts nothing. PostgreSQL is used when DATABASE_URL is set or the local server answers.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import autocannon from "autocannon";
import { sql } from "drizzle-orm";
import { Agent, getGlobalDispatcher, setGlobalDispatcher } from "undici";
import { loadConfig } from "../src/internal/config.ts";
import type { StoreLocation } from "../src/internal/db/store.ts";
import { startService } from "../src/service.ts";
import { ApiClient, LogCapture, seedAccount } from "../test/support/api-client.ts";
import { createFreshDatabase } from "../test/support/databases.ts";
import { benchSendRatio } from "./send-ratio.ts";
import { benchSends } from "./sends.ts";
import { benchWebhooks } from "./webhooks.ts";
import { benchX402 } from "./x402.ts";

const MAIN = fileURLToPath(new URL("../src/main.ts", import.meta.url));
const DEFAULT_PG = "postgres://postgres@127.0.0.1:5432/test";
const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 10);
const CONNECTIONS = 50;
/** Rows of the deep-history benchmark; 0 skips it. */
const HISTORY_ROWS = Number(process.env.BENCH_HISTORY_ROWS ?? 1_000_000);

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() =>
        typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port")),
      );
    });
  });
}

/** A fresh database on DATABASE_URL's server, or the local one; undefined when no server answers. */
async function freshPostgres(): Promise<{ url: string; drop(): Promise<void> } | undefined> {
  return createFreshDatabase(process.env.DATABASE_URL ?? DEFAULT_PG).catch(() => undefined);
}

/** The service as its own process (as `npm start` runs it), so the load generator does not share its event loop. */
async function spawnService(env: Record<string, string>): Promise<{ url: string; child: ChildProcess }> {
  const port = await freePort();
  const child = spawn(process.execPath, ["--import", "tsx", MAIN], {
    env: {
      ...process.env,
      ...env,
      PORT: String(port),
      LOG_LEVEL: "warn",
      SVC_RATE_LIMIT_PER_MINUTE: "100000000",
      SVC_RATE_LIMIT_PER_ADDRESS_PER_MINUTE: "100000000",
    },
    stdio: ["ignore", "ignore", "inherit"],
  });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 300; i++) {
    try {
      if ((await fetch(`${url}/healthz`)).ok) return { url, child };
    } catch {}
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill("SIGKILL");
  throw new Error("service did not become healthy");
}

async function load(url: string, headers: Record<string, string> = {}) {
  const result = await autocannon({ url, connections: CONNECTIONS, duration: DURATION_S, headers });
  return {
    rps: Math.round(result.requests.average),
    p99: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors,
  };
}

async function throughput(store: "pglite" | "postgres", env: Record<string, string>) {
  const { url, child } = await spawnService(env);
  try {
    const api = new ApiClient(url);
    const { apiKey: key } = await seedAccount(api, "bench");
    const wallet = (await api.post("/v1/wallets", { name: "bench", chains: ["base", "solana"] }, key)).body;
    // Warm up both paths (JIT, connection pool, prepared statements) before measuring.
    await autocannon({ url: `${url}/healthz`, connections: CONNECTIONS, duration: 2 });
    await autocannon({
      url: `${url}/v1/wallets/${wallet.id}`,
      connections: CONNECTIONS,
      duration: 2,
      headers: { authorization: `Bearer ${key}` },
    });
    const health = await load(`${url}/healthz`);
    const walletRead = await load(`${url}/v1/wallets/${wallet.id}`, { authorization: `Bearer ${key}` });
    const ratio = ((walletRead.rps / health.rps) * 100).toFixed(0);
    console.log(
      `[${store}] GET /healthz: ${health.rps} req/s, p99 ${health.p99} ms | authenticated GET /v1/wallets/:id: ${walletRead.rps} req/s, p99 ${walletRead.p99} ms (${ratio}% of healthz; non-2xx ${health.non2xx + walletRead.non2xx}, errors ${health.errors + walletRead.errors}) at ${CONNECTIONS} connections, ${DURATION_S}s`,
    );
  } finally {
    child.kill("SIGTERM");
  }
}

/** Page 1 of a wallet with 1,000,000 history rows: the indexes and the count table at work. */
async function deepHistory(
  store: "pglite" | "postgres",
  storeLocation: StoreLocation,
  rows: number,
  masterKey: string,
) {
  const service = await startService(
    loadConfig({
      PORT: "0",
      LOG_LEVEL: "warn",
      SVC_MASTER_KEY: masterKey,
      SVC_JWT_SECRET: randomBytes(32).toString("hex"),
      SVC_RATE_LIMIT_PER_MINUTE: "100000000",
    }),
    { store: storeLocation, logDestination: new LogCapture() },
  );
  try {
    const url = service.url;
    const api = new ApiClient(url);
    const { apiKey: key } = await seedAccount(api, "deep");
    const wallet = (await api.post("/v1/wallets", { name: "deep", chains: ["base", "solana"] }, key)).body;
    const seedStart = performance.now();
    const db = service.store.db;
    await db.execute(sql`
      INSERT INTO transactions (id, wallet_id, type, chain, token, amount_atomic, decimals, from_address, to_address, tx_hash, status, created_at)
      SELECT 'tx_bench' || g, ${wallet.id}, (ARRAY['send','receive','x402'])[1 + g % 3], (ARRAY['base','solana'])[1 + g % 2], 'USDC',
             g, 6, 'from', 'to', 'hash' || g, 'confirmed', now() - (g || ' seconds')::interval
      FROM generate_series(1, ${rows}) AS g`);
    await db.execute(sql`ANALYZE transactions`);
    const seedSeconds = ((performance.now() - seedStart) / 1000).toFixed(1);
    // On PGlite the seed holds this process's one thread for over a minute: the server's keep-alive timeout
    // and the client's both pass in it, and the socket the setup's requests left idle can be closed under
    // the next request (ECONNRESET). The timed requests start on fresh connections.
    const idle = getGlobalDispatcher();
    setGlobalDispatcher(new Agent());
    await idle.close();
    const timings: Record<string, number[]> = {
      all: [],
      "chain=solana": [],
      "type=receive": [],
      "chain=base&type=send": [],
    };
    for (let i = 0; i < 60; i++) {
      for (const [label, list] of Object.entries(timings)) {
        const query = label === "all" ? "" : `?${label}`;
        const start = performance.now();
        const page = (await api.get(`/v1/wallets/${wallet.id}/transactions${query}`, key)).body;
        if (i >= 10) list.push(performance.now() - start);
        if (label === "all" && page.total !== rows) throw new Error(`total ${page.total} != ${rows}`);
      }
    }
    const stats = Object.entries(timings)
      .map(([label, list]) => {
        list.sort((a, b) => a - b);
        const p = (q: number) => (list[Math.floor(q * (list.length - 1))] ?? 0).toFixed(1);
        return `${label}: p50 ${p(0.5)} ms, p99 ${p(0.99)} ms`;
      })
      .join(" | ");
    console.log(
      `[${store}] page 1 of a ${rows.toLocaleString("en")}-row history (seeded in ${seedSeconds}s), 50 sequential requests each: ${stats}`,
    );
  } finally {
    await service.close();
  }
}

async function main() {
  const dataDir = mkdtempSync(join(tmpdir(), "svc-bench-"));
  try {
    await throughput("pglite", { SVC_DATA_DIR: dataDir, DATABASE_URL: "" });
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
  const pgDb = await freshPostgres();
  if (pgDb) {
    try {
      const masterKey = randomBytes(32).toString("base64");
      await throughput("postgres", {
        DATABASE_URL: pgDb.url,
        SVC_MASTER_KEY: masterKey,
        SVC_JWT_SECRET: randomBytes(32).toString("hex"),
      });
      if (HISTORY_ROWS > 0) await deepHistory("postgres", { databaseUrl: pgDb.url }, HISTORY_ROWS, masterKey);
    } finally {
      await pgDb.drop();
    }
  } else {
    console.log("[postgres] skipped: no PostgreSQL at DATABASE_URL or 127.0.0.1:5432");
  }
  const pgliteRows = Number(process.env.BENCH_PGLITE_HISTORY_ROWS ?? HISTORY_ROWS);
  if (pgliteRows > 0)
    await deepHistory("pglite", { pgliteMemory: true }, pgliteRows, randomBytes(32).toString("base64"));
}

async function sends(bench: (label: string, store: StoreLocation) => Promise<void>) {
  await bench("pglite", { pgliteMemory: true });
  const pgDb = await freshPostgres();
  if (!pgDb) return;
  try {
    await bench("postgres", { databaseUrl: pgDb.url });
  } finally {
    await pgDb.drop();
  }
}

async function x402() {
  await benchX402("pglite", { pgliteMemory: true });
}

// BENCH_ONLY=http, ratio, sends, x402 or webhooks runs one part.
const only = process.env.BENCH_ONLY;
if (only === undefined || only === "http") await main();
if (only === undefined || only === "ratio") await sends(benchSendRatio);
if (only === undefined || only === "sends") await sends(benchSends);
if (only === undefined || only === "x402") await x402();
if (only === undefined || only === "webhooks") await sends(benchWebhooks);
