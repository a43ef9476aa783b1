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
 * The setup file of those packages, run before each test file: after the file's tests, it stops the local
 * chains and kills the service processes the file started.
 */
export const serviceTestPerFile = fileURLToPath(
  new URL("./packages/server/test/support/per-file.ts", import.meta.url),
);
