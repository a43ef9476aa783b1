import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";
import { ciReport, serviceTestFiles, serviceTestSetup } from "../../vitest.shared.ts";

export default defineConfig({
  // As in tsconfig.json: the SDK's sources, so no build is needed (its package entry is its dist).
  resolve: { alias: { "@svc/sdk": fileURLToPath(new URL("../sdk/src/index.ts", import.meta.url)) } },
  test: {
    ...ciReport("cli"),
    include: ["src/**/*.test.ts", "test/**/*.test.ts"],
    globalSetup: ["test/build-cli.ts", serviceTestSetup],
    ...serviceTestFiles,
    // Each file starts a real service and local chains and runs the CLI (built once, build-cli.ts) as
    // processes; room on 2 cores.
    testTimeout: 300_000,
    hookTimeout: 300_000,
    maxWorkers: 2,
  },
});
