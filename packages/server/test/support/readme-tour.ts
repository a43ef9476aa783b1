import { type ChildProcess, spawn } from "node:child_process";
import { closeSync, openSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { eventually } from "./eventually.ts";

/**
 * Runs a README's tour as a reader would: the ```console blocks marked `<!-- tour -->` are pasted, command by
 * command and in order, into one bash session (`set -euo pipefail`), and each answer is compared with the
 * one the README shows. What the harness does that a reader does by hand:
 * - `<!-- tour: stop-service -->` stops the service the harness started (the reader's Ctrl-C);
 * - a command ending in `&` has its output sent to a log file instead of the terminal;
 * - a command whose comment ends in "a moment later" is asked again until its answer matches (until a
 *   deadline), because it shows the state after the background confirmer or watcher has moved.
 */

/** One step of a tour, in README order. */
export type TourStep =
  | { kind: "stop-service"; line: number }
  | {
      kind: "command";
      /** The command as pasted (continuation lines included, without the `$ ` prompt). */
      command: string;
      /** The answer the README shows, or undefined when it shows none. */
      expected: string | undefined;
      /** 1-based line of the `$ ` prompt, and the README lines holding the shown answer. */
      line: number;
      outputLines: [number, number] | undefined;
      later: boolean;
    };

const LATER = /#\s*a moment later\s*$/;

/** The tour steps of a README, from its marked blocks. */
export function parseTour(markdown: string): TourStep[] {
  const lines = markdown.split("\n");
  const steps: TourStep[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? "";
    if (line.startsWith("<!-- tour: stop-service")) steps.push({ kind: "stop-service", line: i + 1 });
    if (line.trim() !== "<!-- tour -->") continue;
    if (lines[i + 1]?.trim() !== "```console")
      throw new Error(`line ${i + 1}: a tour marker not before a console block`);
    let j = i + 2;
    const block: { text: string; index: number }[] = [];
    while (j < lines.length && lines[j]?.trim() !== "```") block.push({ text: lines[j] ?? "", index: j++ });
    steps.push(...parseBlock(block));
    i = j;
  }
  return steps;
}

function parseBlock(block: { text: string; index: number }[]): TourStep[] {
  const steps: TourStep[] = [];
  let k = 0;
  while (k < block.length) {
    const entry = block[k] as { text: string; index: number };
    if (!entry.text.startsWith("$ ")) {
      if (entry.text.trim() !== "") throw new Error(`line ${entry.index + 1}: output before any command`);
      k++;
      continue;
    }
    const commandLines = [entry.text.slice(2)];
    k++;
    // Indented lines right after the prompt continue the command (a `\` continuation or an open quote).
    while (k < block.length && /^\s+\S/.test(block[k]?.text ?? "")) commandLines.push(block[k++]?.text ?? "");
    const output: { text: string; index: number }[] = [];
    while (k < block.length && !block[k]?.text.startsWith("$ "))
      output.push(block[k++] as (typeof output)[0]);
    while (output.length > 0 && output[output.length - 1]?.text.trim() === "") output.pop();
    const command = commandLines.join("\n");
    steps.push({
      kind: "command",
      command,
      expected: output.length > 0 ? output.map((o) => o.text).join("\n") : undefined,
      line: entry.index + 1,
      outputLines:
        output.length > 0
          ? [(output[0]?.index ?? 0) + 1, (output[output.length - 1]?.index ?? 0) + 1]
          : undefined,
      later: LATER.test(commandLines[commandLines.length - 1] ?? ""),
    });
  }
  return steps;
}

/**
 * What differs from run to run (ids, keys, tokens, addresses, hashes, times, ports) becomes a placeholder of
 * its kind, so an answer is compared by its shape and its stable values.
 */
export function normalise(text: string): string {
  return text
    .replace(/\b(usr|wal|key|tx|req|dec|rcp|evt|wh)_[A-Za-z0-9]+/g, "$1_<id>")
    .replace(/\bwhsec_[A-Za-z0-9+/=]+/g, "whsec_<secret>")
    .replace(/"nextCursor":"\d+\.\d+"/g, '"nextCursor":"<cursor>"')
    .replace(/\bsvc_[A-Za-z0-9]+/g, "svc_<key>")
    .replace(/\bazd_[A-Za-z0-9_-]+/g, "azd_<token>")
    .replace(/\beyJ[A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+){0,2}/g, "<jwt>")
    .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/g, "<time>")
    .replace(/0x[0-9a-fA-F]{64}\b/g, "<hash>")
    .replace(/0x[0-9a-fA-F]{40}\b/g, "<address>")
    .replace(/\b[0-9a-f]{64}\b/g, "<sha256>")
    .replace(/\b[1-9A-HJ-NP-Za-km-z]{32,88}\b/g, "<base58>")
    .replace(/127\.0\.0\.1:\d+/g, "127.0.0.1:<port>")
    .split("\n")
    .map((l) => l.trimEnd())
    .join("\n")
    .trim();
}

/** Whether an answer matches the one shown; `…` in the shown one stands for anything. */
export function matchesShown(expected: string, actual: string): boolean {
  const pattern = normalise(expected)
    .split("…")
    .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))
    .join("[\\s\\S]*?");
  return new RegExp(`^${pattern}$`).test(normalise(actual));
}

/** Children started with their own process group, so a whole tree can be stopped. */
function stopGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  try {
    if (child.pid) process.kill(-child.pid, signal);
  } catch {}
}

/** Whether any process of the child's group is still there (exited ones included until they are reaped). */
function groupAlive(child: ChildProcess): boolean {
  try {
    if (child.pid) process.kill(-child.pid, 0);
    return Boolean(child.pid);
  } catch {
    return false;
  }
}

/**
 * Stops a child and everything it started, as Ctrl-C stops a terminal's foreground job: SIGINT to the whole
 * group, then waiting until every process of it is gone (a daemon removes its pid file as it exits); SIGKILL
 * only for what is still there after a generous wait.
 */
async function stopTree(child: ChildProcess): Promise<void> {
  stopGroup(child, "SIGINT");
  try {
    await eventually(() => !groupAlive(child), { timeoutMs: 30_000, intervalMs: 100 });
  } catch {
    stopGroup(child, "SIGKILL");
    await eventually(() => !groupAlive(child), { timeoutMs: 30_000, intervalMs: 100 });
  }
}

/** One bash process that commands are pasted into, as into a terminal. */
export class ShellSession {
  readonly #bash: ChildProcess;
  #stdout = "";
  #stderr = "";
  #exitCode: number | null | undefined;
  #count = 0;
  #logDir: string;

  constructor(options: { cwd: string; env: NodeJS.ProcessEnv; logDir: string }) {
    this.#logDir = options.logDir;
    this.#bash = spawn("bash", ["--noprofile", "--norc"], {
      cwd: options.cwd,
      env: options.env,
      detached: true,
      stdio: ["pipe", "pipe", "pipe"],
    });
    this.#bash.stdout?.on("data", (chunk: Buffer) => {
      this.#stdout += chunk.toString("utf8");
    });
    this.#bash.stderr?.on("data", (chunk: Buffer) => {
      this.#stderr += chunk.toString("utf8");
    });
    this.#bash.once("exit", (code) => {
      this.#exitCode = code;
    });
    this.#bash.stdin?.write("set -euo pipefail\n");
  }

  /** The shell's standard error so far (curl and node report there). */
  get stderr(): string {
    return this.#stderr;
  }

  /**
   * Pastes one command and returns what it printed. Rejects when the command fails (the shell exits, as
   * `set -e` makes it) or does not finish within `timeoutMs`.
   */
  async run(command: string, timeoutMs: number): Promise<string> {
    const n = this.#count++;
    const marker = `__tour_step_${n}_done__`;
    let pasted = command;
    const background = /&\s*(#.*)?$/.exec(pasted);
    if (background) {
      // Its log lines would land among the answers: they go to a file of their own.
      const log = join(this.#logDir, `background-${n}.log`);
      pasted = `${pasted.slice(0, background.index)} > '${log}' 2>&1 &`;
    }
    const start = this.#stdout.length;
    this.#stderr = "";
    // Nothing a command runs may read the pasted lines that follow it.
    this.#bash.stdin?.write(`{\n${pasted}\n} < /dev/null\nprintf '\\n%s\\n' '${marker}'\n`);
    await eventually(
      () => {
        if (this.#exitCode !== undefined)
          throw new Error(
            `the command failed (the shell exited with ${this.#exitCode}); its stderr:\n${this.#stderr}`,
          );
        return this.#stdout.indexOf(`\n${marker}\n`, start) >= 0;
      },
      { timeoutMs, intervalMs: 20, describe: "the command to finish" },
    );
    const end = this.#stdout.indexOf(`\n${marker}\n`, start);
    return this.#stdout.slice(start, end);
  }

  /** Stops the shell and everything it started in the background. */
  close(): Promise<void> {
    this.#bash.stdin?.end();
    return stopTree(this.#bash);
  }
}

/**
 * What the reader started in the first terminal (`npm start`, `npm run authzd`), at the repository root, in
 * its own process group; ready once `healthUrl` answers.
 */
export class StartedService {
  readonly #child: ChildProcess;
  readonly logFile: string;

  private constructor(child: ChildProcess, logFile: string) {
    this.#child = child;
    this.logFile = logFile;
  }

  static async start(options: {
    cwd: string;
    env: NodeJS.ProcessEnv;
    command: string[];
    healthUrl: string;
    logFile: string;
  }): Promise<StartedService> {
    const fd = openSync(options.logFile, "a");
    const [file = "npm", ...args] = options.command;
    const child = spawn(file, args, {
      cwd: options.cwd,
      env: options.env,
      detached: true,
      stdio: ["ignore", fd, fd],
    });
    closeSync(fd);
    const service = new StartedService(child, options.logFile);
    const exited = new Promise<never>((_, reject) =>
      child.once("exit", (code) =>
        reject(
          new Error(
            `${options.command.join(" ")} exited with ${code}:\n${readFileSync(options.logFile, "utf8")}`,
          ),
        ),
      ),
    );
    exited.catch(() => {});
    try {
      await Promise.race([
        eventually(
          () =>
            fetch(options.healthUrl).then(
              (r) => r.ok,
              () => false,
            ),
          { timeoutMs: 240_000, intervalMs: 250, describe: `${options.healthUrl} to answer` },
        ),
        exited,
      ]);
    } catch (error) {
      await service.stop();
      throw error;
    }
    return service;
  }

  stop(): Promise<void> {
    return stopTree(this.#child);
  }
}

/** The environment a fresh terminal would have: nothing of the test runner's or of a developer's Svc setup. */
export function cleanEnvironment(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (/^(npm_|VITEST|SVC_|AUTHZD_|SPEND_AUTHZ)/.test(name)) continue;
    if (["DATABASE_URL", "REDIS_URL", "PORT", "HOST", "LOG_LEVEL", "INIT_CWD", "NODE_ENV"].includes(name))
      continue;
    env[name] = value;
  }
  return { ...env, ...extra };
}
