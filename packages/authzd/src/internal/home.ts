import fs from "node:fs";
import path from "node:path";
import { mintToken, tokenSha256 } from "./tokens.ts";

/** Paths of the daemon's state under `AUTHZD_HOME`. */
export interface HomePaths {
  home: string;
  auditLog: string;
  /** Head anchor of the audit log: `{ rows, headHash }` of its durable head. */
  auditHead: string;
  operatorToken: string;
  pidFile: string;
  daemonInfo: string;
}

/**
 * The files of one daemon home.
 *
 * @example
 * homePaths("/var/lib/authzd").auditLog; // "/var/lib/authzd/audit.jsonl"
 */
export function homePaths(home: string): HomePaths {
  return {
    home,
    auditLog: path.join(home, "audit.jsonl"),
    auditHead: path.join(home, "audit.head"),
    operatorToken: path.join(home, "operator.token"),
    pidFile: path.join(home, "authzd.pid"),
    daemonInfo: path.join(home, "daemon.json"),
  };
}

/** Creates the home directory (mode 0700) if needed. */
export function ensureHome(paths: HomePaths): void {
  fs.mkdirSync(paths.home, { recursive: true, mode: 0o700 });
}

/**
 * Returns the SHA-256 of the operator token, minting the token into `operator.token` (mode 0600) on
 * first start. The token is written and synced under a temporary name and then linked into place, so a
 * crash never leaves an empty or partial token file, and an existing token is never overwritten. Only
 * the hash stays in memory.
 */
export function ensureOperatorToken(paths: HomePaths): { sha256: string; minted: boolean } {
  if (!fs.existsSync(paths.operatorToken)) {
    const token = mintToken("azd_op");
    const tmp = `${paths.operatorToken}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, `${token}\n`, { mode: 0o600, flush: true });
    try {
      fs.linkSync(tmp, paths.operatorToken);
      syncDir(paths.home);
      return { sha256: tokenSha256(token), minted: true };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    } finally {
      fs.rmSync(tmp, { force: true });
    }
  }
  fs.chmodSync(paths.operatorToken, 0o600);
  return { sha256: tokenSha256(readOperatorToken(paths)), minted: false };
}

/** Reads the operator token (for the CLI). */
export function readOperatorToken(paths: HomePaths): string {
  const token = fs.readFileSync(paths.operatorToken, "utf8").trim();
  if (token === "") throw new Error(`${paths.operatorToken} is empty`);
  return token;
}

/** How long a process waits for another one's takeover of a killed daemon's pid file before giving up. */
const TAKEOVER_WAIT_MS = 5_000;

/**
 * Takes the home for this process: two daemons appending to one chain would fork it. The pid file is
 * created only if absent, and whole (never seen empty), so one process at a time holds it. A pid file left by a killed daemon is
 * removed only inside a takeover (a directory made with `mkdir`, which one process at a time can make), after
 * reading it again there: two processes that found it stale at once cannot both remove it, nor one remove
 * the other's fresh file. A takeover interrupted by a crash (its directory left behind, a few system calls
 * wide) is reported rather than guessed at.
 */
export function acquireHomeLock(paths: HomePaths): () => void {
  const takeover = `${paths.pidFile}.takeover`;
  const deadline = Date.now() + TAKEOVER_WAIT_MS;
  for (;;) {
    if (createWhole(paths.pidFile, `${process.pid}\n`)) {
      return () => {
        try {
          if (fs.readFileSync(paths.pidFile, "utf8").trim() === String(process.pid))
            fs.unlinkSync(paths.pidFile);
        } catch {
          // Already gone: nothing to release.
        }
      };
    }
    const owner = pidFileOwner(paths);
    if (typeof owner === "number") throw new Error(`another authzd (pid ${owner}) is using ${paths.home}`);
    if (owner === "absent") continue;
    try {
      fs.mkdirSync(takeover, { mode: 0o700 });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      // Another process is taking it over: wait for it, then see who holds the home.
      if (Date.now() > deadline) {
        throw new Error(
          `${takeover} stays: a takeover of ${paths.home} was interrupted; remove it if no authzd runs there`,
        );
      }
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20);
      continue;
    }
    try {
      // Read again inside the takeover: only a file that is there and names no living process is removed
      // (one found absent may be created meanwhile, by a process that then holds the home).
      if (pidFileOwner(paths) === "stale") fs.rmSync(paths.pidFile);
    } finally {
      fs.rmdirSync(takeover);
    }
  }
}

/**
 * Creates `file` holding `text` if no such file exists, atomically and whole: written to a file of this
 * process's own, then linked into place (a link fails if the name is taken). False when it existed.
 */
function createWhole(file: string, text: string): boolean {
  const own = `${file}.${process.pid}.tmp`;
  try {
    // Inside the try: a write that fails part-way (a full disk) leaves no temp file behind either.
    fs.writeFileSync(own, text, { mode: 0o600 });
    fs.linkSync(own, file);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw error;
  } finally {
    fs.rmSync(own, { force: true });
  }
}

/**
 * Who holds the home by its pid file: the living process it names, "stale" when it names no process that
 * exists (a killed daemon's), or "absent". This process's own pid counts as stale: a pid file left in a
 * container whose daemon had the same pid.
 */
function pidFileOwner(paths: HomePaths): number | "stale" | "absent" {
  let text: string;
  try {
    text = fs.readFileSync(paths.pidFile, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return "absent";
    throw error;
  }
  const owner = Number.parseInt(text, 10);
  return Number.isInteger(owner) && owner !== process.pid && processExists(owner) ? owner : "stale";
}

function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Where a running daemon listens; written after `listen` so clients (the CLI, tests) can find it. */
export interface DaemonInfo {
  pid: number;
  host: string;
  port: number;
  url: string;
}

/** Writes `daemon.json` atomically (temp file and rename). */
export function writeDaemonInfo(paths: HomePaths, info: DaemonInfo): void {
  const tmp = `${paths.daemonInfo}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, `${JSON.stringify(info)}\n`, { mode: 0o600 });
  fs.renameSync(tmp, paths.daemonInfo);
}

/** Reads `daemon.json`, or undefined when no daemon has written one. */
export function readDaemonInfo(paths: HomePaths): DaemonInfo | undefined {
  try {
    return JSON.parse(fs.readFileSync(paths.daemonInfo, "utf8")) as DaemonInfo;
  } catch {
    return undefined;
  }
}

/**
 * Where the daemon that holds this home listens: `daemon.json`, only while the living process that holds
 * the home's lock is the one that wrote it. A killed daemon's file is left behind, and whatever listens at
 * its address now is not the daemon (it must not be sent the operator token).
 */
export function runningDaemon(paths: HomePaths): DaemonInfo | undefined {
  const info = readDaemonInfo(paths);
  if (info === undefined) return undefined;
  return pidFileOwner(paths) === info.pid ? info : undefined;
}

/** Fsyncs a directory so that a created or renamed entry survives a crash. */
export function syncDir(dir: string): void {
  const fd = fs.openSync(dir, "r");
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}
