/**
 * Setup file (vitest `setupFiles`) of every package whose tests use the server's test support: run before
 * each test file, even where workers are reused without isolation (`isolate: false`), where the support
 * modules are evaluated once per worker and hooks they registered would serve only the first file. Its
 * hooks run after the file's own (vitest runs after-hooks in reverse), once the file's servers are closed.
 */
import { afterAll } from "vitest";
import { killFileServiceProcesses } from "./service-process.ts";
import { stopFileDevnet } from "./test-server.ts";

afterAll(stopFileDevnet);
afterAll(killFileServiceProcesses);
