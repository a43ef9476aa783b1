/**
 * Runs `svc` as a real process (through node), against a service the test started: the run's build of the
 * CLI (build-cli.ts), or its bin, which compiles the sources with tsx as an installed `svc` does. The child's
 * environment holds only what the test gives it (and PATH), so no credential of the machine leaks in.
 */
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { inject } from "vitest";

const BIN = fileURLToPath(new URL("../bin/svc.js", import.meta.url));

/** What a finished `svc` process left. */
export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  /** stdout parsed as JSON (throws with the output when it is not). */
  json<T = any>(): T;
}

/**
 * Runs `svc args…` from the run's build with `env` (plus PATH) and optional stdin; resolves when it exits,
 * whatever its code.
 * @example
 * const run = await svc(["wallets", "list", "--json"], { SVC_CONFIG: file });
 */
export function svc(args: string[], env: Record<string, string>, input?: string): Promise<Run> {
  return runNode(inject("svcBuild"), args, env, input);
}

/** As {@link svc}, through `bin/svc.js`: the sources compiled by tsx in the process, as installed. */
export function svcFromBin(args: string[], env: Record<string, string>, input?: string): Promise<Run> {
  return runNode(BIN, args, env, input);
}

function runNode(script: string, args: string[], env: Record<string, string>, input?: string): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script, ...args], {
      env: { PATH: process.env.PATH ?? "", ...env },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      stdout += chunk;
    });
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
      stderr += chunk;
    });
    child.on("error", reject);
    child.on("close", (code) =>
      resolve({
        code,
        stdout,
        stderr,
        json: () => {
          try {
            return JSON.parse(stdout);
          } catch {
            throw new Error(`svc ${args.join(" ")} printed no JSON (exit ${code}):\n${stdout}\n${stderr}`);
          }
        },
      }),
    );
    child.stdin.end(input ?? "");
  });
}
