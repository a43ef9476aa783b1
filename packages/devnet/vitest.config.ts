import { defineConfig } from "vitest/config";
import { ciReport } from "../../vitest.shared.ts";

export default defineConfig({
  test: {
    ...ciReport("devnet"),
    include: ["test/**/*.test.ts", "src/**/*.test.ts"],
    // Limits only bound a broken run: files start anvil and LiteSVM on a shared 2-core machine.
    testTimeout: 120_000,
    hookTimeout: 120_000,
  },
});
