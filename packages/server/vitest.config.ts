import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";
import { ciReport, serviceTestPerFile, serviceTestSetup } from "../../vitest.shared.ts";

export default defineConfig({
  // As in tsconfig.json (and as `npm start` runs): the SDK's sources, which `/mcp` loads, so no build is needed.
  resolve: { alias: { "@svc/sdk": fileURLToPath(new URL("../sdk/src/index.ts", import.meta.url)) } },
  test: {
    ...ciReport("server"),
    include: ["src/**/*.test.ts", "test/**/*.test.ts"],
    globalSetup: [serviceTestSetup],
    setupFiles: [serviceTestPerFile],
    // A worker runs file after file in one module graph: the service's modules load once per worker, not
    // once per file (measured: 2.6 s of CPU to load them, and a process's first PGlite store costs 3.5 s
    // more than the next). Each file still gets its own local chains and stores; per-file.ts does what must
    // happen once per file.
    isolate: false,
    // Limits only bound a broken run: end-to-end files start services, chains and child processes on a
    // shared 2-core machine, where a file can wait minutes for CPU (beside two CPU hogs and other sessions,
    // a 34 s test took over 120 s). No assertion is about time.
    testTimeout: 300_000,
    hookTimeout: 300_000,
    // Two cores: files run two at a time, each with its own store.
    maxWorkers: 2,
  },
});
