/**
 * `npm start` twice: a second service on the embedded store another one runs on is refused (PGlite is one
 * process's database, and the wallets' sealed keys are in it), and one on a port in use says so in one line.
 * A service killed without a chance to let its data directory go leaves it to the next start. On one
 * PostgreSQL, a second service starting local chains of its own beside a running one is refused too, and a
 * running one keeps its claim across its connection being cut, or stops if another took it meanwhile.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fundEvm } from "@svc/devnet";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CHAINS_CLAIM_LOCK } from "../src/internal/db/store.ts";
import { eventually } from "./support/eventually.ts";
import { unpackInitializedPglite } from "./support/pglite-setup.ts";
import { spawnService, startServiceProcess } from "./support/service-process.ts";
import {
  createFreshDatabase,
  STORE_KIND,
  seedAccount,
  sharedDevnet,
  TEST_JWT_SECRET,
  TEST_MASTER_KEY,
} from "./support/test-server.ts";

let dataDir: string;
let chainsEnv: Record<string, string>;

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "svc-one-per-dir-"));
  const devnet = await sharedDevnet();
  chainsEnv = {
    LOG_LEVEL: "warn",
    SVC_RPC_BASE: devnet.evm.rpcUrl,
    SVC_USDC_BASE: devnet.evm.usdc,
    SVC_RPC_SOLANA: devnet.solana.rpcUrl,
    SVC_USDC_SOLANA: devnet.solana.usdcMint,
  };
});
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

/**
 * The environment of a service on PGlite in `dataDir`/`name`, a store PGlite has initialized (what is tested
 * here is who may use a directory, not initdb).
 */
function embeddedIn(name: string): Record<string, string> {
  const dir = join(dataDir, name);
  unpackInitializedPglite(join(dir, "pg"));
  return { DATABASE_URL: "", SVC_DATA_DIR: dir };
}

/** Runs a service that is expected to refuse to start; resolves with its exit code and what it said. */
async function refusedStart(env: Record<string, string>) {
  const service = spawnService({ env: { ...chainsEnv, ...env }, stderr: "pipe" });
  let stderr = "";
  service.child.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString("utf8");
  });
  return { code: await service.exited, lines: stderr.trimEnd().split("\n") };
}

// Each service here runs on PGlite whatever store the suite is on: once, in the embedded run.
describe.skipIf(STORE_KIND === "postgres")("one service per data directory", () => {
  it("refuses a second service on a data directory in use, in one line; the first goes on; after a SIGKILL the next start takes it", {
    timeout: 300_000,
  }, async () => {
    const embedded = embeddedIn("svc");
    const first = await startServiceProcess({ env: { ...chainsEnv, ...embedded } });
    const { apiKey } = await seedAccount(first.api);
    const second = await refusedStart({ ...embedded, PORT: "0" });
    expect(second.code).toBe(1);
    expect(second.lines).toEqual([
      `svc: another Svc (pid ${first.child.pid}) is using ${embedded.SVC_DATA_DIR}; stop it, or give this one its own SVC_DATA_DIR (and PORT)`,
    ]);
    expect((await first.api.get("/v1/wallets", apiKey)).status).toBe(200);

    // Killed at once, it leaves its lock behind, naming a process that is gone: the next start takes it.
    await first.stop("SIGKILL");
    const third = await startServiceProcess({ env: { ...chainsEnv, ...embedded } });
    try {
      expect((await third.api.get("/v1/wallets", apiKey)).status).toBe(200);
    } finally {
      await third.stop();
    }
  });

  it("a port in use: one line naming it, exit 1", { timeout: 300_000 }, async () => {
    const first = await startServiceProcess({
      env: { ...chainsEnv, ...embeddedIn("a") },
    });
    try {
      const port = new URL(first.url).port;
      const second = await refusedStart({ ...embeddedIn("b"), PORT: port });
      expect(second.code).toBe(1);
      expect(second.lines).toEqual([
        `svc: port ${port} is in use: stop what listens there, or set PORT to another`,
      ]);
    } finally {
      await first.stop();
    }
  });
});

describe.runIf(STORE_KIND === "postgres")("services with local chains of their own on one PostgreSQL", () => {
  let database: Awaited<ReturnType<typeof createFreshDatabase>>;
  beforeAll(async () => {
    database = await createFreshDatabase();
  });
  afterAll(() => database?.drop());
  /** `npm start` with DATABASE_URL and no RPC URLs: chains of its own. */
  const ownChains = (name: string) => ({
    DATABASE_URL: database.url,
    SVC_DATA_DIR: join(dataDir, name),
    SVC_MASTER_KEY: TEST_MASTER_KEY,
    SVC_JWT_SECRET: TEST_JWT_SECRET,
    LOG_LEVEL: "warn",
    // The confirmer's first pass is at start-up; the next comes after the test, so a spend stays pending.
    SVC_CONFIRMER_INTERVAL_MS: "3600000",
  });

  /**
   * With a spend of 8 (of a daily limit of 10) pending on the running service `first`, starts a second one
   * on the same database (`secondEnv`; default, local chains of its own): it is refused in the one line
   * `refusal`, and the first's spend stays pending, its room in the daily limit used.
   */
  async function refusedBeside(
    first: Awaited<ReturnType<typeof startServiceProcess>>,
    fund: (wallet: { id: string; address: `0x${string}` }, apiKey: string) => Promise<void>,
    refusal: string,
    secondEnv: Record<string, string> = ownChains("pg-second"),
  ) {
    const { apiKey } = await seedAccount(first.api);
    const wallet = await first.api.post(
      "/v1/wallets",
      { name: "w", chains: ["base"], policy: { dailyLimit: "10" } },
      apiKey,
    );
    await fund({ id: wallet.body.id, address: wallet.body.evm.address }, apiKey);
    const send = () =>
      first.api.post(
        `/v1/wallets/${wallet.body.id}/send`,
        { to: "0x1111111111111111111111111111111111111111", amount: "8", token: "USDC", chain: "base" },
        apiKey,
      );
    const sent = await send();
    expect(sent.body.status, sent.text).toBe("pending");
    const spendStatus = async () =>
      (await first.api.get(`/v1/transactions/${sent.body.id}`, apiKey)).body.status as string;

    const second = spawnService({ env: { ...secondEnv, PORT: "0" }, stderr: "pipe" });
    let stderr = "";
    second.child.stderr?.on("data", (chunk: Buffer) => {
      stderr += chunk.toString("utf8");
    });
    let exitCode: number | null | undefined;
    void second.exited.then((code) => {
      exitCode = code;
    });
    // Before, it started, and its start ended the first's spend failed ("the local chain it was sent on
    // was started anew") though it lands on the first's chain, and gave its $8 back to the daily limit.
    await eventually(async () => exitCode !== undefined || (await spendStatus()) !== "pending", {
      timeoutMs: 120_000,
      describe: "the second service to exit, or the first's spend to leave pending",
    });
    await second.stop();
    expect(exitCode).toBe(1);
    expect(stderr.trimEnd().split("\n")).toEqual([refusal]);
    expect(await spendStatus()).toBe("pending");
    const over = await send();
    expect(over.status, over.text).toBe(403);
    expect(over.body.error.reason).toBe("daily_limit");
  }

  /** Funds a wallet with 1 ETH and 20 USDC on `service`'s own chain, from its faucet. */
  async function fundByFaucet(
    service: Awaited<ReturnType<typeof startServiceProcess>>,
    walletId: string,
    apiKey: string,
  ) {
    for (const [token, amount] of [
      ["ETH", "1"],
      ["USDC", "20"],
    ]) {
      const funded = await service.api.post(
        `/v1/wallets/${walletId}/faucet`,
        { chain: "base", token, amount },
        apiKey,
      );
      expect(funded.status, funded.text).toBe(201);
    }
  }

  it("refuses the second in one line: the first's pending spend stays pending, its daily room used", {
    timeout: 300_000,
  }, async () => {
    const first = await startServiceProcess({ env: ownChains("pg-first") });
    try {
      await refusedBeside(
        first,
        (wallet, apiKey) => fundByFaucet(first, wallet.id, apiKey),
        "svc: another running instance serves chains from this database: a service starting local chains of its own needs a database of its own; run `npx svc-devnet` and point each at it (SVC_RPC_BASE, SVC_RPC_SOLANA, SVC_USDC_BASE, SVC_USDC_SOLANA, and the faucet keys)",
      );
    } finally {
      await first.stop();
    }
  });

  it("refuses it beside a running service on chains run elsewhere, whose chains have the same names", {
    timeout: 300_000,
  }, async () => {
    const devnet = await sharedDevnet();
    const first = await startServiceProcess({
      env: { ...ownChains("pg-beside"), ...chainsEnv, LOG_LEVEL: "warn" },
    });
    try {
      await refusedBeside(
        first,
        async (wallet) => {
          await fundEvm(devnet, wallet.address, { eth: 10n ** 18n, usdc: 20n * 10n ** 6n });
        },
        "svc: another running instance serves chains from this database: a service starting local chains of its own needs a database of its own; run `npx svc-devnet` and point each at it (SVC_RPC_BASE, SVC_RPC_SOLANA, SVC_USDC_BASE, SVC_USDC_SOLANA, and the faucet keys)",
      );
    } finally {
      await first.stop();
    }
  });

  it("keeps its claim when the claim's connection is cut, and stops when another instance takes it meanwhile", {
    timeout: 300_000,
  }, async () => {
    const service = await startServiceProcess({ env: { ...ownChains("pg-cut"), ...chainsEnv } });
    const admin = new pg.Client({ connectionString: database.url });
    await admin.connect();
    try {
      /** The backend holding the chains' claim (a shared lock: this service's chains run elsewhere). */
      const claimHolder = async () =>
        (
          await admin.query<{ pid: number }>(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objid = $1 AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            [CHAINS_CLAIM_LOCK],
          )
        ).rows[0]?.pid;
      const first = await claimHolder();
      expect(first).toBeDefined();
      let exitCode: number | null | undefined;
      void service.exited.then((code) => {
        exitCode = code;
      });

      // Cut (as a restarted server or a proxy's timeout would): the lock is taken again, on another
      // connection. Before, it was gone while the service ran on, and a service of its own chains started
      // beside it.
      await admin.query("SELECT pg_terminate_backend($1)", [first]);
      await eventually(async () => ((await claimHolder()) ?? first) !== first, {
        timeoutMs: 30_000,
        describe: "the claim to be held again",
      });
      const exclusive = await admin.query<{ claimed: boolean }>(
        "SELECT pg_try_advisory_lock($1) AS claimed",
        [CHAINS_CLAIM_LOCK],
      );
      expect(exclusive.rows[0]?.claimed).toBe(false);
      expect((await service.api.get("/healthz")).status).toBe(200);

      // Cut while another takes it: the service cannot serve its chains safely beside it and stops.
      const rival = new pg.Client({ connectionString: database.url });
      await rival.connect();
      try {
        const rivalClaim = rival.query("SELECT pg_advisory_lock($1)", [CHAINS_CLAIM_LOCK]);
        await eventually(
          async () =>
            (
              await admin.query(
                "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND objid = $1 AND NOT granted",
                [CHAINS_CLAIM_LOCK],
              )
            ).rowCount === 1,
          { describe: "the rival to wait for the lock" },
        );
        await admin.query("SELECT pg_terminate_backend($1)", [await claimHolder()]);
        await rivalClaim;
        await eventually(async () => exitCode !== undefined, {
          timeoutMs: 60_000,
          describe: "the service to stop",
        });
        expect(exitCode).toBe(1);
      } finally {
        await rival.end();
      }
    } finally {
      await admin.end();
      await service.stop();
    }
  });

  it("refuses a service on chains run elsewhere beside one serving its own, whose chains have the same names", {
    timeout: 300_000,
  }, async () => {
    const first = await startServiceProcess({ env: ownChains("pg-own-first") });
    try {
      await refusedBeside(
        first,
        (wallet, apiKey) => fundByFaucet(first, wallet.id, apiKey),
        "svc: another running instance serves local chains of its own on this database: instances sharing a database share chains; run `npx svc-devnet` and point each at it (SVC_RPC_BASE, SVC_RPC_SOLANA, SVC_USDC_BASE, SVC_USDC_SOLANA, and the faucet keys)",
        { ...ownChains("pg-elsewhere-second"), ...chainsEnv, LOG_LEVEL: "warn" },
      );
    } finally {
      await first.stop();
    }
  });
});
