/**
 * `npm start` twice: a second service on the embedded store another one runs on is refused (PGlite is one
 * process's database, and the wallets' sealed keys are in it), and one on a port in use says so in one line.
 * A service killed without a chance to let its data directory go leaves it to the next start.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { unpackInitializedPglite } from "./support/pglite-setup.ts";
import { spawnService, startServiceProcess } from "./support/service-process.ts";
import { STORE_KIND, seedAccount, sharedDevnet } from "./support/test-server.ts";

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
