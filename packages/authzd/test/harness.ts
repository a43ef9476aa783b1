import { type ChildProcess, spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

/** The package directory (cwd of spawned daemons and CLI runs). */
export const PACKAGE_DIR = fileURLToPath(new URL("..", import.meta.url));
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

/** A fresh temporary `AUTHZD_HOME`. */
export function tempHome(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), "authzd-test-"));
}

/** A reply from the daemon: status and parsed JSON body. */
export interface Reply<T = Record<string, unknown>> {
  status: number;
  body: T;
}

/** Options for one request. */
export interface CallOptions {
  token?: string;
  body?: unknown;
  /** Raw body, sent as is (for malformed-input tests). */
  raw?: string | Buffer;
  headers?: Record<string, string>;
}

/** A daemon running as a child process on a real socket. */
export class TestDaemon {
  private constructor(
    readonly child: ChildProcess,
    readonly url: string,
    readonly home: string,
    readonly operatorToken: string,
    readonly output: () => string,
  ) {}

  /**
   * Spawns `authzd serve` with tsx on port 0 and waits for the line that names its bound port.
   * The environment is only what is passed (plus PATH), so the developer's variables do not leak in.
   */
  static async start(env: Record<string, string> = {}, home: string = tempHome()): Promise<TestDaemon> {
    const child = spawn(process.execPath, ["--import", "tsx", CLI, "serve"], {
      cwd: PACKAGE_DIR,
      env: { PATH: process.env.PATH ?? "", AUTHZD_HOME: home, AUTHZD_PORT: "0", ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout?.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.stderr?.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`daemon did not start:\n${output}`)), 30_000);
      const onData = (): void => {
        const match = /authzd listening on (http:\/\/\S+)/.exec(output);
        if (match?.[1] !== undefined) {
          clearTimeout(timer);
          resolve(match[1]);
        }
      };
      child.stdout?.on("data", onData);
      child.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`daemon exited with ${code}:\n${output}`));
      });
    });
    const operatorToken = fs.readFileSync(path.join(home, "operator.token"), "utf8").trim();
    return new TestDaemon(child, url, home, operatorToken, () => output);
  }

  /** Sends a request and parses the JSON reply. */
  async call<T = Record<string, unknown>>(
    method: string,
    urlPath: string,
    options: CallOptions = {},
  ): Promise<Reply<T>> {
    const headers: Record<string, string> = { ...options.headers };
    if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
    let body: string | Buffer | undefined = options.raw;
    if (options.body !== undefined) {
      body = JSON.stringify(options.body);
      headers["content-type"] ??= "application/json";
    }
    const response = await fetch(`${this.url}${urlPath}`, {
      method,
      headers,
      ...(body === undefined ? {} : { body }),
    });
    const text = await response.text();
    return { status: response.status, body: (text === "" ? {} : JSON.parse(text)) as T };
  }

  /** Creates an identity with the given capabilities (and budget) as the operator; returns its token. */
  async identity(name: string, capabilities: string[], budgetCredits?: number): Promise<string> {
    const created = await this.call<{ token: string }>("POST", "/identities", {
      token: this.operatorToken,
      body: { name, ...(budgetCredits === undefined ? {} : { budget_credits: budgetCredits }) },
    });
    if (created.status !== 201) throw new Error(`identity ${name}: ${JSON.stringify(created.body)}`);
    for (const capability of capabilities) {
      const granted = await this.call("POST", "/capabilities/grant", {
        token: this.operatorToken,
        body: { identity: name, capability },
      });
      if (granted.status !== 200) throw new Error(`grant ${capability}: ${JSON.stringify(granted.body)}`);
    }
    return created.body.token;
  }

  /** The audit log's rows, parsed from the file. */
  auditRows(): Record<string, unknown>[] {
    const file = path.join(this.home, "audit.jsonl");
    if (!fs.existsSync(file)) return [];
    return fs
      .readFileSync(file, "utf8")
      .split("\n")
      .filter((line) => line !== "")
      .map((line) => (JSON.parse(line) as { row: Record<string, unknown> }).row);
  }

  /** Stops the daemon gracefully (SIGTERM) and waits for it to exit. */
  stop(): Promise<void> {
    return this.signal("SIGTERM");
  }

  /** Kills the daemon without warning and waits for it to be gone. */
  kill(): Promise<void> {
    return this.signal("SIGKILL");
  }

  private signal(signal: NodeJS.Signals): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return Promise.resolve();
    return new Promise((resolve) => {
      this.child.once("exit", () => resolve());
      this.child.kill(signal);
    });
  }
}

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
