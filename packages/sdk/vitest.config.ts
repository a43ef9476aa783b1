import { defineConfig } from "vitest/config";
import { ciReport, serviceTestFiles, serviceTestSetup } from "../../vitest.shared.ts";

export default defineConfig({
  test: {
    ...ciReport("sdk"),
    include: ["src/**/*.test.ts", "test/**/*.test.ts"],
    globalSetup: [serviceTestSetup],
    ...serviceTestFiles,
    // End-to-end files start a real service, local chains and daemons; give them room on 2 cores.
    testTimeout: 120_000,
    hookTimeout: 120_000,
    maxWorkers: 2,
  },
});
