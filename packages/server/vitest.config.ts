import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";
import { ciReport, serviceTestFiles, serviceTestSetup } from "../../vitest.shared.ts";

export default defineConfig({
  // As in tsconfig.json (and as `npm start` runs): the SDK's sources, which `/mcp` loads, so no build is needed.
  resolve: { alias: { "@svc/sdk": fileURLToPath(new URL("../sdk/src/index.ts", import.meta.url)) } },
  test: {
    ...ciReport("server"),
    include: ["src/**/*.test.ts", "test/**/*.test.ts"],
    globalSetup: [serviceTestSetup],
    ...serviceTestFiles,
    // Limits only bound a broken run: end-to-end files start services, chains and child processes on a
    // shared 2-core machine, where a file can wait minutes for CPU (beside two CPU hogs and other sessions,
    // a 34 s test took over 120 s). No assertion is about time.
    testTimeout: 300_000,
    hookTimeout: 300_000,
    // Two cores: files run two at a time, each with its own store.
    maxWorkers: 2,
  },
});
