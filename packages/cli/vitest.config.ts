import { defineConfig } from "vitest/config";
import { ciReport } from "../../vitest.shared.ts";

export default defineConfig({
  test: {
    ...ciReport("cli"),
    include: ["src/**/*.test.ts", "test/**/*.test.ts"],
    // Each file starts a real service and local chains and runs the CLI as processes; room on 2 cores.
    testTimeout: 300_000,
    hookTimeout: 300_000,
    maxWorkers: 2,
  },
});
