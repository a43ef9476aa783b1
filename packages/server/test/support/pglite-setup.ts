/**
 * Vitest global setup of every package whose tests start the service ({@link createTestServer}): PGlite
 * initializes one data directory for the whole run (initdb in WebAssembly: 2–3 s of CPU), and each in-memory
 * store starts from a copy of it (under a second) and runs the migrations itself, as a new store does.
 * The dump holds nothing of the service's: only what PGlite's initdb wrote.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PGlite } from "@electric-sql/pglite";
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
