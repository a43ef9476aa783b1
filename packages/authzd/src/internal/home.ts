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

/**
 * Takes the home for this process: two daemons appending to one chain would fork it. A pid file left
 * by a killed daemon is taken over when that process no longer exists.
 */
export function acquireHomeLock(paths: HomePaths): () => void {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      fs.writeFileSync(paths.pidFile, `${process.pid}\n`, { flag: "wx", mode: 0o600 });
      return () => {
        try {
          if (fs.readFileSync(paths.pidFile, "utf8").trim() === String(process.pid))
            fs.unlinkSync(paths.pidFile);
        } catch {
          // Already gone: nothing to release.
        }
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    }
    const owner = Number.parseInt(fs.readFileSync(paths.pidFile, "utf8"), 10);
    if (Number.isInteger(owner) && owner !== process.pid && processExists(owner)) {
      throw new Error(`another authzd (pid ${owner}) is using ${paths.home}`);
    }
    fs.unlinkSync(paths.pidFile);
  }
  throw new Error(`could not take ${paths.pidFile}`);
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

/** Fsyncs a directory so that a created or renamed entry survives a crash. */
export function syncDir(dir: string): void {
  const fd = fs.openSync(dir, "r");
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}
