import { defineConfig } from "vitest/config";
import { ciReport } from "../../vitest.shared.ts";

export default defineConfig({
  test: {
    ...ciReport("x402-local"),
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
