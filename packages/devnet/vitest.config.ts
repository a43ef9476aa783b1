import { defineConfig } from "vitest/config";
import { ciReport } from "../../vitest.shared.ts";

export default defineConfig({
  test: {
    ...ciReport("devnet"),
    include: ["test/**/*.test.ts", "src/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
