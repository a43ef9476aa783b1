import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fundEvm, fundSolana } from "@svc/devnet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ChainClient } from "../src/chains/types.ts";
import { devnetClients } from "./support/chains.ts";
import { eventually } from "./support/eventually.ts";
import { unpackInitializedPglite } from "./support/pglite-setup.ts";
import { startServiceProcess } from "./support/service-process.ts";
import { createFreshDatabase, STORE_KIND, seedAccount, sharedDevnet } from "./support/test-server.ts";

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
    // Initialized by PGlite already: the crash is what is tested, not a first start.
    unpackInitializedPglite(join(dir, "pg"));
    storeEnv = { SVC_DATA_DIR: dir };
    cleanup = async () => rmSync(dir, { recursive: true, force: true });
  }
});
afterAll(() => cleanup());

const secrets = {
  SVC_MASTER_KEY: randomBytes(32).toString("base64"),
  SVC_JWT_SECRET: randomBytes(32).toString("hex"),
};

/** The service as `npm start` runs it, in its own process, on the test file's devnet and store. */
function startProcess() {
  return startServiceProcess({
    env: {
      ...storeEnv,
      ...secrets,
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
  });
}

describe("crash safety", () => {
  // Two service start-ups, a burst and a recovery on 2 loaded cores: the limit only bounds a broken run.
  it("after a SIGKILL mid-burst and a restart, chain and ledger agree: nothing twice, nothing left pending", {
    timeout: 600_000,
  }, async () => {
    const first = await startProcess();
    const { apiKey } = await seedAccount(first.api);
    const wallet = (
      await first.api.post("/v1/wallets", { name: "crash", chains: ["base", "solana"] }, apiKey)
    ).body;
    await fundEvm(devnet, wallet.evm.address, { eth: 10n ** 18n, usdc: 100n * USDC });
    await fundSolana(devnet, wallet.solana.address, { sol: 10n ** 9n, usdc: 100n * USDC });
    const evmTo = `0x${randomBytes(20).toString("hex")}`;
    const solanaTo = (await import("./support/chains.ts")).solanaKey;
    const solanaRecipient = (await solanaTo()).address;

    // 40 sends in flight; the process is killed once some have been answered and others have not.
    let answered = 0;
    const burst = Array.from({ length: 40 }, (_, i) =>
      first.api
        .post(
          `/v1/wallets/${wallet.id}/send`,
          i % 2
            ? { to: evmTo, amount: "1", chain: "base" }
            : { to: solanaRecipient, amount: "1", chain: "solana" },
          apiKey,
        )
        .then((r) => {
          answered++;
          if (answered === 10) first.child.kill("SIGKILL");
          return r.status;
        })
        // fetch's "fetch failed", caused by a socket error: the connection died mid-request.
        .catch((error: { cause?: { code?: string } }) => {
          const code = error.cause?.code ?? "";
          if (code === "UND_ERR_SOCKET" || code === "ECONNRESET") return "cut";
          return code === "ECONNREFUSED" ? "refused" : `unexpected: ${String(error)} (${code})`;
        }),
    );
    const outcomes = await Promise.all(burst);
    expect(outcomes.filter((o) => o === 201).length).toBeGreaterThanOrEqual(10);
    // The kill came while requests were in flight: some were cut, and nothing failed otherwise.
    expect(outcomes.filter((o) => o === "cut").length).toBeGreaterThan(0);
    expect(outcomes.filter((o) => typeof o === "string" && o.startsWith("unexpected"))).toEqual([]);
    await first.exited;

    const second = await startProcess();
    try {
      let sends: { status: string; amount: string; chain: string; txHash: string }[] = [];
      await eventually(
        async () => {
          const page = await second.api.get(
            `/v1/wallets/${wallet.id}/transactions?type=send&limit=100`,
            apiKey,
          );
          // A service still starting on a loaded machine may not answer yet: ask again.
          if (page.status !== 200) return false;
          sends = page.body.data;
          return sends.every((t) => t.status !== "pending");
        },
        {
          timeoutMs: 120_000,
          intervalMs: 200,
          describe: () =>
            `no pending send; still pending: ${JSON.stringify(sends.filter((t) => t.status === "pending"))}`,
        },
      );
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
      await second.stop();
    }
  });
});
