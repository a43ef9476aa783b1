import { defineConfig } from "vitest/config";
import { ciReport } from "../../vitest.shared.ts";

export default defineConfig({
  test: {
    ...ciReport("authzd"),
    include: ["src/**/*.test.ts", "test/**/*.test.ts"],
    // End-to-end files spawn real daemons; give them room on a 2-core machine.
    testTimeout: 300_000,
    hookTimeout: 300_000,
    maxWorkers: 2,
  },
});
