import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";
import { ciReport, serviceTestFiles, serviceTestSetup } from "../../vitest.shared.ts";

export default defineConfig({
  // As in vite.config.ts: the SDK's sources.
  resolve: { alias: { "@svc/sdk": fileURLToPath(new URL("../sdk/src/index.ts", import.meta.url)) } },
  test: {
    ...ciReport("console"),
    include: ["src/**/*.test.ts", "test/**/*.test.ts"],
    globalSetup: ["test/build-console.ts", serviceTestSetup],
    ...serviceTestFiles,
    // Each file starts a service, local chains and a headless Chromium; room on 2 cores.
    testTimeout: 180_000,
    hookTimeout: 300_000,
    maxWorkers: 1,
  },
});
