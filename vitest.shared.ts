import { fileURLToPath } from "node:url";

/**
 * Test settings shared by every package's vitest config. When SVC_TEST_RESULTS names a directory (CI sets
 * it), each package also writes a JSON report there, from which `.ci/summarize.mjs` prints the closing line.
 */
export function ciReport(packageName: string): { reporters?: string[]; outputFile?: { json: string } } {
  const dir = process.env.SVC_TEST_RESULTS;
  return dir ? { reporters: ["default", "json"], outputFile: { json: `${dir}/${packageName}.json` } } : {};
}

/**
 * The global setup of every package whose tests start the service with the server's `createTestServer`:
 * PGlite initializes one data directory for the run, from which each test store starts.
 */
export const serviceTestSetup = fileURLToPath(
  new URL("./packages/server/test/support/pglite-setup.ts", import.meta.url),
);

/**
 * How those packages run their test files. A worker runs file after file in one module graph (`isolate:
 * false`): the service's modules load once per worker, not once per file (measured: 2.6 s of CPU to load
 * them, and a process's first PGlite store costs 3.5 s more than the next). Each file still gets its own
 * local chains and stores; the setup file, run before each file, stops the file's local chains and kills
 * the service processes it started, after its tests.
 */
export const serviceTestFiles = {
  setupFiles: [fileURLToPath(new URL("./packages/server/test/support/per-file.ts", import.meta.url))],
  isolate: false,
};
