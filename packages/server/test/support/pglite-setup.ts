/**
 * One data directory PGlite initializes for the whole test run (initdb in WebAssembly: 2–3 s of CPU), from
 * which every in-memory PGlite of the tests starts instead (under a second), and every PGlite directory a
 * test unpacks it into. A store started from it runs the migrations itself, as a new store does: the dump
 * holds nothing of the service's, only what initdb wrote.
 *
 * The default export is the global setup of every package whose tests start the service
 * (`serviceTestSetup` in vitest.shared.ts); tests take the dump with {@link initializedPglite}, or unpacked
 * into a directory with {@link unpackInitializedPglite}.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { inject } from "vitest";
import type { TestProject } from "vitest/node";

declare module "vitest" {
  export interface ProvidedContext {
    /** The file holding a dump of a data directory PGlite has just initialized. */
    pgliteInitializedDump: string;
  }
}

export default async function setup(project: TestProject): Promise<() => void> {
  const dir = mkdtempSync(join(tmpdir(), "svc-pglite-"));
  const pglite = await PGlite.create();
  const dump = await pglite.dumpDataDir("none");
  await pglite.close();
  const file = join(dir, "initialized.tar");
  writeFileSync(file, Buffer.from(await dump.arrayBuffer()));
  project.provide("pgliteInitializedDump", file);
  return () => rmSync(dir, { recursive: true, force: true });
}

let dump: Blob | undefined;

/**
 * The data directory the run's global setup had PGlite initialize, as a dump to start a PGlite from
 * (`PGlite.create({ loadDataDir })`, or a store's `initializedFrom`).
 */
export function initializedPglite(): Blob {
  dump ??= new Blob([readFileSync(initializedPgliteFile())]);
  return dump;
}

/**
 * Makes `pgliteDir` (which must not exist) the data directory the run's global setup had PGlite initialize,
 * unpacked from its dump (a tar): a store opened there skips initdb (seconds of CPU in a service process) and
 * migrates as a new one. Not for a test about what a service makes of an empty directory.
 * @example unpackInitializedPglite(join(dataDir, "pg")); // then start the service on SVC_DATA_DIR=dataDir
 */
export function unpackInitializedPglite(pgliteDir: string): void {
  if (existsSync(pgliteDir))
    throw new Error(`${pgliteDir} exists: the store is unpacked into a new directory`);
  mkdirSync(pgliteDir, { recursive: true });
  // The archive's names start with "/", which tar takes relative to -C (saying so on stderr).
  execFileSync("tar", ["-xf", initializedPgliteFile(), "-C", pgliteDir], { stdio: "ignore" });
}

function initializedPgliteFile(): string {
  const file = inject("pgliteInitializedDump");
  if (!file)
    throw new Error(
      "no initialized PGlite to start from: add serviceTestSetup (vitest.shared.ts) to this package's globalSetup",
    );
  return file;
}
