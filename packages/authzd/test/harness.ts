import { spawn } from "node:child_process";
import path from "node:path";
import { PACKAGE_DIR } from "../src/testing.ts";

// One harness: the daemon process helpers live in the package's exported testing module.
export {
  type CallOptions,
  PACKAGE_DIR,
  type Reply,
  startTestDaemon,
  TestDaemon,
  tempHome,
} from "../src/testing.ts";

const CLI = path.join(PACKAGE_DIR, "src", "cli.ts");

/** A valid spec 2.9 authorize body; tests override fields. */
export const SPEND = {
  provider: "svc",
  network: "eip155:8453",
  asset: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
  amount: "1000",
  per_call_cap: "5000",
  credits: 1,
  destination: "0x1111111111111111111111111111111111111111",
} as const;

/** Result of running the CLI once. */
export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `authzd …` (the CLI entry under tsx) with the given home. */
export function runCli(args: string[], home: string, env: Record<string, string> = {}): Promise<CliRun> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ["--import", "tsx", CLI, ...args], {
      cwd: PACKAGE_DIR,
      env: { PATH: process.env.PATH ?? "", AUTHZD_HOME: home, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    child.on("exit", (code) => resolve({ code, stdout, stderr }));
  });
}

/** Runs `tasks` with at most `limit` in flight; results in input order. */
export async function pool<T>(tasks: (() => Promise<T>)[], limit: number): Promise<T[]> {
  const results: T[] = new Array(tasks.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < tasks.length) {
      const index = next++;
      results[index] = await (tasks[index] as () => Promise<T>)();
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, tasks.length) }, worker));
  return results;
}
