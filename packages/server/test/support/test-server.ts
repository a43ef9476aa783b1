import { randomBytes } from "node:crypto";
import { type DevnetInfo, startDevnet } from "@svc/devnet";
import { type Config, loadConfig } from "../../src/internal/config.ts";
import type { StoreLocation } from "../../src/internal/db/store.ts";
import { type RunningService, startService } from "../../src/service.ts";
import { ApiClient, type ApiResponse, LogCapture } from "./api-client.ts";
import { TestClock } from "./clock.ts";
import { createFreshDatabase } from "./databases.ts";
import { initializedPglite } from "./pglite-setup.ts";

export { ApiClient, type ApiResponse, LogCapture, seedAccount, slowRequest } from "./api-client.ts";
export { createFreshDatabase } from "./databases.ts";

/** Which store the suite runs on: PostgreSQL when DATABASE_URL is set (CI's second pass), else PGlite. */
export const STORE_KIND: "pglite" | "postgres" = process.env.DATABASE_URL ? "postgres" : "pglite";

let fileDevnet: ReturnType<typeof startDevnet> | undefined;

/**
 * The local chains of the current test file: started on first use, shared by every test server of the
 * file, stopped after the file's tests ({@link stopFileDevnet}, from per-file.ts).
 */
export function sharedDevnet(): ReturnType<typeof startDevnet> {
  fileDevnet ??= startDevnet();
  return fileDevnet;
}

/** Stops the current file's local chains, if it started them; the next file starts its own. */
export async function stopFileDevnet(): Promise<void> {
  const running = fileDevnet;
  fileDevnet = undefined;
  await (await running)?.stop();
}

/**
 * The environment of a test server on the shared local chains that reaches its EVM chain through `gate`
 * (so the test steers each request to the node) and its Solana chain directly.
 * @example server = await createTestServer({ env: await evmThroughGate(gate) });
 */
export async function evmThroughGate(gate: { url: string }): Promise<Record<string, string>> {
  const devnet = await sharedDevnet();
  return {
    SVC_RPC_BASE: gate.url,
    SVC_USDC_BASE: devnet.evm.usdc,
    SVC_RPC_SOLANA: devnet.solana.rpcUrl,
    SVC_USDC_SOLANA: devnet.solana.usdcMint,
  };
}

/**
 * The environment of a test server on the shared local chains that reaches its Solana chain through `gate`
 * and its EVM chain directly (the twin of {@link evmThroughGate}).
 * @example server = await createTestServer({ env: await solanaThroughGate(gate) });
 */
export async function solanaThroughGate(gate: { url: string }): Promise<Record<string, string>> {
  const devnet = await sharedDevnet();
  return {
    SVC_RPC_BASE: devnet.evm.rpcUrl,
    SVC_USDC_BASE: devnet.evm.usdc,
    SVC_RPC_SOLANA: gate.url,
    SVC_USDC_SOLANA: devnet.solana.usdcMint,
  };
}

export interface TestServerOptions {
  /** Environment on top of the test defaults (generous rate limits, fixed secrets). */
  env?: Record<string, string>;
  /** Use this store instead of a fresh one (a second instance, or a restart). */
  store?: StoreLocation;
  /** The local chains to serve; default the file's {@link sharedDevnet}. */
  devnet?: DevnetInfo;
  /** Serve the local x402 demo on those chains, as `npm start` does. Default false. */
  x402Demo?: boolean;
}

export interface TestServer {
  url: string;
  service: RunningService;
  config: Config;
  logs: LogCapture;
  /** The store location, to start a second instance or a restart on the same data. */
  storeLocation: StoreLocation;
  api: ApiClient;
  /** The clock the service measures expiries by; tests move it forward instead of sleeping. */
  clock: TestClock;
  close(): Promise<void>;
}

export const TEST_MASTER_KEY = randomBytes(32).toString("base64");
export const TEST_JWT_SECRET = randomBytes(32).toString("hex");

/**
 * Starts a real listening service on 127.0.0.1 with a fresh store: PGlite in memory (started from the run's
 * initialized data directory, {@link initializedPglite}), or a fresh PostgreSQL database when DATABASE_URL is set.
 */
export async function createTestServer(options: TestServerOptions = {}): Promise<TestServer> {
  let dropDatabase: (() => Promise<void>) | undefined;
  let storeLocation = options.store;
  if (!storeLocation) {
    if (STORE_KIND === "postgres") {
      const db = await createFreshDatabase();
      storeLocation = { databaseUrl: db.url };
      dropDatabase = db.drop;
    } else {
      storeLocation = { pgliteMemory: true, initializedFrom: initializedPglite() };
    }
  }
  const config = loadConfig({
    PORT: "0",
    HOST: "127.0.0.1",
    SVC_MASTER_KEY: TEST_MASTER_KEY,
    SVC_JWT_SECRET: TEST_JWT_SECRET,
    LOG_LEVEL: "info",
    SVC_RATE_LIMIT_PER_MINUTE: "100000",
    SVC_RATE_LIMIT_PER_ADDRESS_PER_MINUTE: "100000",
    SVC_LOGIN_LIMIT_PER_MINUTE: "1000",
    SVC_REGISTER_LIMIT_PER_MINUTE: "100000",
    SVC_DATA_DIR: "/nonexistent-test-data-dir",
    SVC_WATCH_INTERVAL_MS: "100",
    SVC_CONFIRMER_INTERVAL_MS: "100",
    ...options.env,
  });
  const logs = new LogCapture();
  const devnet = options.devnet ?? (await sharedDevnet());
  const clock = new TestClock();
  const service = await startService(config, {
    store: storeLocation,
    logDestination: logs,
    devnet,
    now: clock.now,
    ...(options.x402Demo ? { x402Demo: true } : {}),
  });
  return {
    url: service.url,
    service,
    config,
    logs,
    storeLocation,
    api: new ApiClient(service.url),
    clock,
    close: async () => {
      await service.close();
      await dropDatabase?.();
    },
  };
}

/** Asserts the api.md error shape and returns the error object. */
export function expectErrorShape(response: ApiResponse): {
  code: string;
  message: string;
  requestId: string;
  reason?: string;
  details?: Record<string, unknown>;
} {
  const error = response.body?.error;
  if (
    !error ||
    typeof error.code !== "string" ||
    typeof error.message !== "string" ||
    typeof error.requestId !== "string"
  ) {
    throw new Error(`not an error body (${response.status}): ${response.text.slice(0, 300)}`);
  }
  if (response.headers.get("x-request-id") !== error.requestId) {
    throw new Error(
      `X-Request-Id ${response.headers.get("x-request-id")} differs from requestId ${error.requestId}`,
    );
  }
  return error;
}
