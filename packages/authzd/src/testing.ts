/**
 * Test harness: the real daemon as a child process on a real socket, for this package's tests and for
 * other packages' (`import { startTestDaemon } from "@svc/authzd/testing"`). Nothing here runs the
 * daemon in-process, so what a test sees is what a client of a deployed daemon sees.
 */
import { type ChildProcess, spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

/** The package directory (cwd of spawned daemons, so that `--import tsx` resolves from here). */
export const PACKAGE_DIR = fileURLToPath(new URL("..", import.meta.url));
const CLI = path.join(PACKAGE_DIR, "src", "cli.ts");
/** `authzd serve` on a clock the harness moves (testing-clock.ts). */
const CLOCKED_SERVE = path.join(PACKAGE_DIR, "src", "testing-clock.ts");
const START_TIMEOUT_MS = 60_000;

/** A fresh temporary directory for `AUTHZD_HOME`. */
export function tempHome(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), "authzd-test-"));
}

/** A reply from the daemon: status, parsed JSON body and the response headers. */
export interface Reply<T = Record<string, unknown>> {
  status: number;
  body: T;
  headers: Headers;
}

/** Options for one request. */
export interface CallOptions {
  /** Bearer token (an identity's, or `operatorToken`). */
  token?: string;
  /** Sent as JSON with `Content-Type: application/json`. */
  body?: unknown;
  /** Raw body, sent as is (for malformed-input tests). */
  raw?: string | Buffer;
  headers?: Record<string, string>;
}

/** Options of {@link TestDaemon.identity}. */
export interface IdentityOptions {
  /** Own budget in credits per window (default: the daemon's `AUTHZD_BUDGET_CREDITS`). */
  budgetCredits?: number;
  /** Own ceiling on `per_call_cap`, atomic units as a decimal string (default: `AUTHZD_MAX_PER_CALL_CAP`). */
  maxPerCallCap?: string;
}

/** Options of {@link startTestDaemon}. */
export interface StartOptions {
  /** An existing home to start on (e.g. a copied log); default: a fresh temporary directory. */
  home?: string;
  /**
   * Runs the daemon on a clock the test moves forward ({@link TestDaemon.advanceClock}) instead of waiting
   * for a reservation to lapse: the system clock plus this offset (0 to start at the real time; a restart
   * on the same home passes on the last daemon's {@link TestDaemon.clockOffsetMs}). Without it the daemon
   * is `authzd serve` on the system clock.
   */
  clockOffsetMs?: number | undefined;
}

/**
 * Spawns `authzd serve` (the real CLI) on port 0 and resolves once it listens. Spend authorization is
 * on (`SPEND_AUTHZ_ENABLED=1`) unless `env` says otherwise; `env` is the daemon's whole environment
 * besides `PATH`, `AUTHZD_HOME` and `AUTHZD_PORT`, so the developer's variables do not leak in.
 *
 * @example
 * const daemon = await startTestDaemon({ AUTHZD_RESERVATION_TTL_SECONDS: "1" });
 * const agent = await daemon.identity("agent", ["wallet.spend.authorize"], { budgetCredits: 10 });
 * const verdict = await daemon.call("POST", "/spend/authorize", { token: agent, body: { ... } });
 * await daemon.stop({ removeHome: true });
 */
export function startTestDaemon(
  env: Record<string, string> = {},
  options: StartOptions = {},
): Promise<TestDaemon> {
  return TestDaemon.start(env, options.home ?? env.AUTHZD_HOME ?? tempHome(), options.clockOffsetMs);
}

/** What the clocked daemon prints once its clock reads the system clock plus `offsetMs`. */
export function clockMovedLine(offsetMs: number): string {
  return `authzd test clock: system clock + ${offsetMs} ms`;
}

/** A daemon running as a child process on a real socket. Start it with {@link startTestDaemon}. */
export class TestDaemon {
  private constructor(
    private child: ChildProcess,
    /** Base URL, e.g. `http://127.0.0.1:40123`; changes on {@link restart}. */
    public url: string,
    /** The daemon's `AUTHZD_HOME` (audit log, operator token). */
    readonly home: string,
    /** The operator token (administers identities and capabilities; cannot spend). */
    readonly operatorToken: string,
    private readonly env: Record<string, string>,
    private log: { text: string },
    /** How far the daemon's clock is ahead of the system clock; undefined: it is `authzd serve`'s own. */
    private clockOffset: number | undefined,
  ) {}

  /** Spawns a daemon on `home` (default: a fresh temporary one); see {@link startTestDaemon}. */
  static async start(
    env: Record<string, string> = {},
    home: string = tempHome(),
    clockOffsetMs?: number,
  ): Promise<TestDaemon> {
    const { child, url, log } = await spawnDaemon(env, home, clockOffsetMs);
    const operatorToken = fs.readFileSync(path.join(home, "operator.token"), "utf8").trim();
    return new TestDaemon(child, url, home, operatorToken, env, log, clockOffsetMs);
  }

  /** How far the daemon's clock is ahead of the system clock, when it was started on a movable one. */
  get clockOffsetMs(): number | undefined {
    return this.clockOffset;
  }

  /**
   * Moves the daemon's clock `ms` forward (it was started with `clockOffsetMs`); resolves once the daemon
   * reads the new time, so a reservation that lapses within `ms` has lapsed for the next request.
   * @example
   * const daemon = await startTestDaemon({ AUTHZD_RESERVATION_TTL_SECONDS: "1" }, { clockOffsetMs: 0 });
   * await daemon.advanceClock(1000); // every approval made so far has lapsed
   */
  async advanceClock(ms: number): Promise<void> {
    if (this.clockOffset === undefined) throw new Error("the daemon was started without clockOffsetMs");
    if (!Number.isSafeInteger(ms) || ms <= 0)
      throw new Error(`advanceClock: ${ms} is not a positive integer`);
    this.clockOffset += ms;
    const moved = `${clockMovedLine(this.clockOffset)}\n`;
    const { child, log } = this;
    await new Promise<void>((resolve, reject) => {
      const onData = (): void => {
        if (!log.text.includes(moved)) return;
        child.off("exit", onExit);
        child.stdout?.off("data", onData);
        resolve();
      };
      const onExit = (code: number | null): void => {
        child.stdout?.off("data", onData);
        reject(new Error(`daemon exited with ${code} before its clock moved:\n${log.text}`));
      };
      child.stdout?.on("data", onData);
      child.once("exit", onExit);
      child.stdin?.write(`advance ${ms}\n`);
    });
  }

  /** Everything the daemon printed on stdout and stderr since it was (re)started. */
  output(): string {
    return this.log.text;
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
    return {
      status: response.status,
      body: (text === "" ? {} : JSON.parse(text)) as T,
      headers: response.headers,
    };
  }

  /**
   * Creates an identity as the operator and grants it `capabilities` (without expiry); returns its
   * bearer token.
   */
  async identity(name: string, capabilities: string[], options: IdentityOptions = {}): Promise<string> {
    const created = await this.call<{ token: string }>("POST", "/identities", {
      token: this.operatorToken,
      body: {
        name,
        ...(options.budgetCredits === undefined ? {} : { budget_credits: options.budgetCredits }),
        ...(options.maxPerCallCap === undefined ? {} : { max_per_call_cap: options.maxPerCallCap }),
      },
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

  /** The audit log's rows (the `row` of each line), parsed from the file as it is on disk now. */
  auditRows(): Record<string, unknown>[] {
    const file = path.join(this.home, "audit.jsonl");
    if (!fs.existsSync(file)) return [];
    return fs
      .readFileSync(file, "utf8")
      .split("\n")
      .filter((line) => line !== "")
      .map((line) => (JSON.parse(line) as { row: Record<string, unknown> }).row);
  }

  /**
   * Stops the daemon gracefully (SIGTERM) and waits for it to exit. The home stays (for a restart or a
   * look at the log) unless `removeHome` is set.
   */
  async stop(options: { removeHome?: boolean } = {}): Promise<void> {
    await this.signal("SIGTERM");
    if (options.removeHome) fs.rmSync(this.home, { recursive: true, force: true });
  }

  /** Kills the daemon without warning (SIGKILL, as a crash would) and waits for it to be gone. */
  kill(): Promise<void> {
    return this.signal("SIGKILL");
  }

  /**
   * Stops the daemon and starts it again on the same home and environment: it rebuilds its state by
   * replaying the audit log. `url` changes (a new port); tokens stay valid.
   */
  async restart(): Promise<void> {
    await this.stop();
    const { child, url, log } = await spawnDaemon(this.env, this.home, this.clockOffset);
    this.child = child;
    this.url = url;
    this.log = log;
  }

  private signal(signal: NodeJS.Signals): Promise<void> {
    const child = this.child;
    if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
    return new Promise((resolve) => {
      child.once("exit", () => resolve());
      child.kill(signal);
    });
  }
}

async function spawnDaemon(
  env: Record<string, string>,
  home: string,
  clockOffsetMs: number | undefined,
): Promise<{ child: ChildProcess; url: string; log: { text: string } }> {
  const clocked = clockOffsetMs !== undefined;
  const entry = clocked ? [CLOCKED_SERVE, String(clockOffsetMs)] : [CLI, "serve"];
  const child = spawn(process.execPath, ["--import", "tsx", ...entry], {
    cwd: PACKAGE_DIR,
    // PATH only so the child finds what a shell would; everything else the daemon reads comes from `env`.
    env: {
      PATH: process.env.PATH ?? "",
      SPEND_AUTHZ_ENABLED: "1",
      ...env,
      AUTHZD_HOME: home,
      AUTHZD_PORT: "0",
    },
    // A clocked daemon reads its clock's moves on stdin.
    stdio: [clocked ? "pipe" : "ignore", "pipe", "pipe"],
  });
  const log = { text: "" };
  child.stdout?.on("data", (chunk: Buffer) => {
    log.text += chunk.toString();
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    log.text += chunk.toString();
  });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`daemon did not start within ${START_TIMEOUT_MS} ms:\n${log.text}`));
    }, START_TIMEOUT_MS);
    const onData = (): void => {
      const match = /authzd listening on (http:\/\/\S+)/.exec(log.text);
      if (match?.[1] !== undefined) {
        clearTimeout(timer);
        child.off("exit", onExit);
        resolve(match[1]);
      }
    };
    const onExit = (code: number | null): void => {
      clearTimeout(timer);
      reject(new Error(`daemon exited with ${code}:\n${log.text}`));
    };
    child.stdout?.on("data", onData);
    child.once("exit", onExit);
  });
  return { child, url, log };
}
