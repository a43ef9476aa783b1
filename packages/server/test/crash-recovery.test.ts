import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { fundEvm, fundSolana } from "@svc/devnet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ChainClient } from "../src/chains/types.ts";
import { devnetClients } from "./support/chains.ts";
import {
  ApiClient,
  createFreshDatabase,
  STORE_KIND,
  seedAccount,
  sharedDevnet,
} from "./support/test-server.ts";

const MAIN = fileURLToPath(new URL("../src/main.ts", import.meta.url));
const USDC = 1_000_000n;

let devnet: Awaited<ReturnType<typeof sharedDevnet>>;
let chains: { base: ChainClient; solana: ChainClient };
let storeEnv: Record<string, string>;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  devnet = await sharedDevnet();
  chains = await devnetClients(devnet);
  if (STORE_KIND === "postgres") {
    const db = await createFreshDatabase();
    storeEnv = { DATABASE_URL: db.url, SVC_DATA_DIR: mkdtempSync(join(tmpdir(), "svc-crash-")) };
    cleanup = db.drop;
  } else {
    const dir = mkdtempSync(join(tmpdir(), "svc-crash-"));
    storeEnv = { SVC_DATA_DIR: dir };
    cleanup = async () => rmSync(dir, { recursive: true, force: true });
  }
});
afterAll(() => cleanup());

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const probe = createServer().listen(0, "127.0.0.1", () => {
      const address = probe.address();
      probe.close(() => resolve(typeof address === "object" && address ? address.port : 0));
    });
  });
}

const secrets = {
  SVC_MASTER_KEY: randomBytes(32).toString("base64"),
  SVC_JWT_SECRET: randomBytes(32).toString("hex"),
};

/** The service as `npm start` runs it, in its own process, on the test file's devnet and store. */
async function startProcess(): Promise<{ child: ChildProcess; api: ApiClient }> {
  const port = await freePort();
  const child = spawn(process.execPath, ["--import", "tsx", MAIN], {
    env: {
      ...process.env,
      ...storeEnv,
      ...secrets,
      PORT: String(port),
      LOG_LEVEL: "warn",
      SVC_RPC_BASE: devnet.evm.rpcUrl,
      SVC_USDC_BASE: devnet.evm.usdc,
      SVC_RPC_SOLANA: devnet.solana.rpcUrl,
      SVC_USDC_SOLANA: devnet.solana.usdcMint,
      SVC_CONFIRMER_INTERVAL_MS: "100",
      SVC_WATCH_INTERVAL_MS: "200",
      SVC_RATE_LIMIT_PER_MINUTE: "100000",
      SVC_RATE_LIMIT_PER_ADDRESS_PER_MINUTE: "100000",
    },
    stdio: ["ignore", "ignore", "inherit"],
  });
  const api = new ApiClient(`http://127.0.0.1:${port}`);
  for (let i = 0; i < 300; i++) {
    try {
      if ((await api.get("/healthz")).status === 200) return { child, api };
    } catch {}
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill("SIGKILL");
  throw new Error("service did not start");
}

describe("crash safety", () => {
  it("after a SIGKILL mid-burst and a restart, chain and ledger agree: nothing twice, nothing left pending", async () => {
    let { child, api } = await startProcess();
    const { apiKey } = await seedAccount(api);
    const wallet = (await api.post("/v1/wallets", { name: "crash", chains: ["base", "solana"] }, apiKey))
      .body;
    await fundEvm(devnet, wallet.evm.address, { eth: 10n ** 18n, usdc: 100n * USDC });
    await fundSolana(devnet, wallet.solana.address, { sol: 10n ** 9n, usdc: 100n * USDC });
    const evmTo = `0x${randomBytes(20).toString("hex")}`;
    const solanaTo = (await import("./support/chains.ts")).solanaKey;
    const solanaRecipient = (await solanaTo()).address;

    // 40 sends in flight; the process is killed once some have been answered and others have not.
    let answered = 0;
    const burst = Array.from({ length: 40 }, (_, i) =>
      api
        .post(
          `/v1/wallets/${wallet.id}/send`,
          i % 2
            ? { to: evmTo, amount: "1", chain: "base" }
            : { to: solanaRecipient, amount: "1", chain: "solana" },
          apiKey,
        )
        .then((r) => {
          answered++;
          if (answered === 10) child.kill("SIGKILL");
          return r.status;
        })
        .catch(() => "killed"),
    );
    const outcomes = await Promise.all(burst);
    expect(outcomes.filter((o) => o === 201).length).toBeGreaterThanOrEqual(10);
    await new Promise<void>((resolve) =>
      child.exitCode !== null || child.signalCode ? resolve() : child.once("exit", () => resolve()),
    );

    ({ child, api } = await startProcess());
    try {
      const deadline = Date.now() + 60_000;
      let sends: { status: string; amount: string; chain: string; txHash: string }[] = [];
      for (;;) {
        sends = (await api.get(`/v1/wallets/${wallet.id}/transactions?type=send&limit=100`, apiKey)).body
          .data;
        if (sends.every((t) => t.status !== "pending")) break;
        if (Date.now() > deadline)
          throw new Error(`still pending: ${JSON.stringify(sends.filter((t) => t.status === "pending"))}`);
        await new Promise((r) => setTimeout(r, 200));
      }
      const confirmed = (chain: string) =>
        sends.filter((t) => t.chain === chain && t.status === "confirmed").length;
      const usdcOf = (c: ChainClient) =>
        c.config.tokens.find((t) => t.symbol === "USDC") ?? c.config.nativeToken;
      // Every recorded, confirmed send moved exactly 1 USDC once; nothing moved without its record.
      expect(await chains.base.getBalance(evmTo, usdcOf(chains.base))).toBe(BigInt(confirmed("base")) * USDC);
      expect(await chains.solana.getBalance(solanaRecipient, usdcOf(chains.solana))).toBe(
        BigInt(confirmed("solana")) * USDC,
      );
      expect(new Set(sends.map((t) => t.txHash)).size).toBe(sends.length);
      expect(confirmed("base") + confirmed("solana")).toBeGreaterThanOrEqual(
        outcomes.filter((o) => o === 201).length,
      );
    } finally {
      child.kill("SIGTERM");
    }
  });
});
