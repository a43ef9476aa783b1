/**
 * One data directory PGlite initializes for the whole test run (initdb in WebAssembly: 2–3 s of CPU), from
 * which every in-memory PGlite of the tests starts instead (under a second), and every PGlite directory a
 * test copies it into. A store started from it runs the migrations itself, as a new store does: the
 * directory holds nothing of the service's, only what initdb wrote.
 *
 * The default export is the global setup of every package whose tests start the service
 * (`serviceTestSetup` in vitest.shared.ts); tests take the dump with {@link initializedPglite}, a copy of the
 * directory with {@link copyInitializedPglite}.
 */
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { inject } from "vitest";
import type { TestProject } from "vitest/node";

declare module "vitest" {
  export interface ProvidedContext {
    /** The file holding a dump of a data directory PGlite has just initialized. */
    pgliteInitializedDump: string;
    /** That data directory, closed: copied, it is a PGlite directory to open. */
    pgliteInitializedDir: string;
  }
}

export default async function setup(project: TestProject): Promise<() => void> {
  const dir = mkdtempSync(join(tmpdir(), "svc-pglite-"));
  const dataDir = join(dir, "initialized");
  const pglite = await PGlite.create(dataDir);
  const dump = await pglite.dumpDataDir("none");
  await pglite.close();
  const file = join(dir, "initialized.tar");
  writeFileSync(file, Buffer.from(await dump.arrayBuffer()));
  project.provide("pgliteInitializedDump", file);
  project.provide("pgliteInitializedDir", dataDir);
  return () => rmSync(dir, { recursive: true, force: true });
}

let dump: Blob | undefined;

/**
 * The data directory the run's global setup had PGlite initialize, as a dump to start a PGlite from
 * (`PGlite.create({ loadDataDir })`, or a store's `initializedFrom`).
 */
export function initializedPglite(): Blob {
  dump ??= new Blob([readFileSync(provided("pgliteInitializedDump"))]);
  return dump;
}

/**
 * Makes `pgliteDir` (which must not exist) a copy of the data directory the run's global setup had PGlite
 * initialize: a store opened there skips initdb (seconds of CPU in a service process) and migrates as a new
 * one. Not for a test about what a service makes of an empty directory.
 * @example copyInitializedPglite(join(dataDir, "pg")); // then start the service on SVC_DATA_DIR=dataDir
 */
export function copyInitializedPglite(pgliteDir: string): void {
  if (existsSync(pgliteDir)) throw new Error(`${pgliteDir} exists: a copy goes into a new directory`);
  cpSync(provided("pgliteInitializedDir"), pgliteDir, { recursive: true });
}

function provided(key: "pgliteInitializedDump" | "pgliteInitializedDir"): string {
  const path = inject(key);
  if (!path)
    throw new Error(
      "no initialized PGlite to start from: add serviceTestSetup (vitest.shared.ts) to this package's globalSetup",
    );
  return path;
}
