import { cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { unpackInitializedPglite } from "./support/pglite-setup.ts";
import { spawnService, startServiceProcess } from "./support/service-process.ts";
import { STORE_KIND, seedAccount, sharedDevnet } from "./support/test-server.ts";

const SERVER_DIR = fileURLToPath(new URL("..", import.meta.url));
const INSTALLED = fileURLToPath(new URL("../../../node_modules", import.meta.url));

/** A copy of the server beside every installed package but `@svc/*`: an install without the devnet. */
let install: string;
let main: string;

beforeAll(() => {
  install = mkdtempSync(join(tmpdir(), "svc-without-devnet-"));
  cpSync(join(SERVER_DIR, "src"), join(install, "server", "src"), { recursive: true });
  cpSync(join(SERVER_DIR, "package.json"), join(install, "server", "package.json"));
  mkdirSync(join(install, "node_modules"));
  for (const entry of readdirSync(INSTALLED)) {
    if (entry !== "@svc") symlinkSync(join(INSTALLED, entry), join(install, "node_modules", entry));
  }
  main = join(install, "server", "src", "main.ts");
});
afterAll(() => rmSync(install, { recursive: true, force: true }));

/**
 * Environment of a run on PGlite in a fresh data directory, whatever store the suite uses (its store
 * initialized by PGlite already: initdb is not what is tested).
 */
function freshDataDir(): Record<string, string> {
  const dataDir = join(mkdtempSync(join(install, "data-")), "svc");
  unpackInitializedPglite(join(dataDir, "pg"));
  return { DATABASE_URL: "", SVC_DATA_DIR: dataDir };
}

// Each service here runs on PGlite whatever store the suite is on: once, in the embedded run.
describe.skipIf(STORE_KIND === "postgres")("an install without @svc/devnet", () => {
  it("refuses the devnet profile with one line saying what to do, and exits 1", async () => {
    const service = spawnService({
      main,
      cwd: join(install, "server"),
      env: { ...freshDataDir(), PORT: "0", SVC_NETWORK_PROFILE: "devnet" },
      stderr: "pipe",
    });
    let stderr = "";
    service.child.stderr?.on("data", (chunk: Buffer) => {
      stderr += chunk.toString("utf8");
    });
    expect(await service.exited).toBe(1);
    expect(stderr.trimEnd().split("\n")).toEqual([
      "svc: SVC_NETWORK_PROFILE=devnet starts local chains from @svc/devnet, which this install lacks (a production install omits it): install the workspace with its development dependencies, or set SVC_RPC_BASE and SVC_RPC_SOLANA (with SVC_USDC_BASE and SVC_USDC_SOLANA) to a devnet run elsewhere, or choose SVC_NETWORK_PROFILE=testnet or mainnet",
    ]);
  });

  it("serves a devnet run elsewhere: nothing loads the devnet unless it is started", async () => {
    const devnet = await sharedDevnet();
    const service = await startServiceProcess({
      main,
      cwd: join(install, "server"),
      env: {
        ...freshDataDir(),
        LOG_LEVEL: "warn",
        SVC_RPC_BASE: devnet.evm.rpcUrl,
        SVC_USDC_BASE: devnet.evm.usdc,
        SVC_RPC_SOLANA: devnet.solana.rpcUrl,
        SVC_USDC_SOLANA: devnet.solana.usdcMint,
      },
    });
    try {
      const { apiKey } = await seedAccount(service.api);
      const chains = await service.api.get("/v1/chains", apiKey);
      expect(chains.status, chains.text).toBe(200);
      expect(chains.body.map((chain: { name: string }) => chain.name)).toEqual(["base", "solana"]);
    } finally {
      await service.stop();
    }
  });
});
