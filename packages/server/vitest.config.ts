import { defineConfig } from "vitest/config";
import { ciReport } from "../../vitest.shared.ts";

export default defineConfig({
  test: {
    ...ciReport("server"),
    include: ["src/**/*.test.ts", "test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two cores: files run two at a time, each with its own store.
    maxWorkers: 2,
  },
});
