import { defineConfig } from "vitest/config";
import { ciReport, serviceTestPerFile, serviceTestSetup } from "../../vitest.shared.ts";

export default defineConfig({
  test: {
    ...ciReport("sdk"),
    include: ["src/**/*.test.ts", "test/**/*.test.ts"],
    globalSetup: [serviceTestSetup],
    setupFiles: [serviceTestPerFile],
    // As the server's tests: one module graph per worker (see packages/server/vitest.config.ts).
    isolate: false,
    // End-to-end files start a real service, local chains and daemons; give them room on 2 cores.
    testTimeout: 120_000,
    hookTimeout: 120_000,
    maxWorkers: 2,
  },
});
