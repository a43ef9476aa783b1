import { hash } from "node:crypto";
import fs from "node:fs";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { readAnchorSync, unanchored } from "./audit/anchor.ts";
import { AuditLog, type HashedRow } from "./audit/log.ts";
import type { AuditRepairedFields } from "./audit/rows.ts";
import { scanAuditFileSync } from "./audit/verify.ts";
import { AuthzService } from "./authz/service.ts";
import { AuthzState } from "./authz/state.ts";
import { createHttpServer } from "./http/server.ts";
import type { Config } from "./internal/config.ts";
import {
  acquireHomeLock,
  ensureHome,
  ensureOperatorToken,
  type HomePaths,
  homePaths,
  syncDir,
  writeDaemonInfo,
} from "./internal/home.ts";

/** A running daemon. */
export interface Daemon {
  url: string;
  host: string;
  port: number;
  paths: HomePaths;
  /** Stops accepting requests, flushes the audit log and releases the home. */
  close(): Promise<void>;
}

/** Hooks for the process that hosts the daemon. */
export interface DaemonOptions {
  /** Start-up notices (never secrets). Default: stderr. */
  notice?: (line: string) => void;
  /** Called once when the audit log cannot be written; the host should exit and let a restart recover. */
  onFatal?: (error: Error) => void;
  /**
   * The clock of expiries, budget windows, rate limits and the audit rows' times, in ms since the epoch.
   * Default: the system clock; tests move one forward instead of waiting for a reservation to lapse.
   */
  now?: () => number;
}

const RECENT_ON_START = 1000;

/**
 * Starts the daemon: takes the home, mints the operator token on first start, verifies the audit log
 * and rebuilds identities, grants, decisions and budgets from it, repairs a torn last line (a crash
 * mid-write) explicitly, then listens.
 *
 * @example
 * const daemon = await startDaemon(loadConfig());
 * console.log(`listening on ${daemon.url}`);
 */
export async function startDaemon(config: Config, options: DaemonOptions = {}): Promise<Daemon> {
  const notice = options.notice ?? ((line: string) => process.stderr.write(`${line}\n`));
  const paths = homePaths(config.home);
  ensureHome(paths);
  const releaseHome = acquireHomeLock(paths);
  try {
    const operator = ensureOperatorToken(paths);
    if (operator.minted) notice(`authzd: minted the operator token into ${paths.operatorToken} (mode 0600)`);

    const state = new AuthzState(config.budgetWindowMs, config.reservationTtlMs);
    const recent: HashedRow[] = [];
    const anchor = readAnchorSync(paths.auditHead);
    const scan = scanAuditFileSync(paths.auditLog, {
      ...(anchor === null ? {} : { anchor }),
      onRow: (row, rowHash) => {
        state.apply(row);
        recent.push({ ...row, hash: rowHash });
        if (recent.length > 2 * RECENT_ON_START) recent.splice(0, recent.length - RECENT_ON_START);
      },
    });
    const unvouched = unanchored(anchor, scan.goodRows, paths.auditHead);
    if (unvouched !== undefined) {
      notice(
        `authzd: ${unvouched}; anchoring the log's ${scan.goodRows} rows as they are (rows cut off its end before now cannot be detected)`,
      );
    }
    let repaired: AuditRepairedFields | null = null;
    if (!scan.report.valid) {
      if (!scan.tornTailOnly) {
        throw new Error(
          `audit chain invalid at row ${scan.report.firstBadIndex}: ${scan.report.problem}; refusing to start (see: authzd audit verify)`,
        );
      }
      repaired = cutTornTail(paths, scan.goodBytes);
      notice(
        `authzd: the audit log ended in a torn line (${repaired.torn_bytes} bytes, from a crash mid-write); moved it to ${repaired.quarantine_file} and recorded an audit_repaired row`,
      );
    }

    // Opening syncs the log (the rows just replayed may have been read from the page cache after a
    // failed sync) and then records its head in the anchor.
    const log = AuditLog.open(
      paths.auditLog,
      { rows: scan.goodRows, headHash: scan.report.headHash, bytes: scan.goodBytes },
      recent,
      { anchorFile: paths.auditHead },
    );
    const now = options.now ?? Date.now;
    if (repaired !== null) await log.append(repaired, new Date(now())).durable;

    let fatal = false;
    const service = new AuthzService(
      config,
      state,
      log,
      paths.auditLog,
      (error) => {
        if (fatal) return;
        fatal = true;
        notice(`authzd: ${error.message}; no further verdicts will be given`);
        options.onFatal?.(error);
      },
      now,
    );
    const server = createHttpServer(service, operator.sha256);
    const port = await listen(server, config.port, config.host);
    const url = `http://${config.host.includes(":") ? `[${config.host}]` : config.host}:${port}`;
    writeDaemonInfo(paths, { pid: process.pid, host: config.host, port, url });

    return {
      url,
      host: config.host,
      port,
      paths,
      close: async () => {
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeIdleConnections();
        });
        await log.close();
        fs.rmSync(paths.daemonInfo, { force: true });
        releaseHome();
      },
    };
  } catch (error) {
    releaseHome();
    throw error;
  }
}

function listen(server: Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/**
 * Moves the bytes after the last whole row into a quarantine file and truncates the log there. The
 * cut bytes were never acknowledged (a verdict is returned only after its line and newline are
 * synced), so no answered decision is lost; the removal itself is recorded on the chain.
 */
function cutTornTail(paths: HomePaths, goodBytes: number): AuditRepairedFields {
  const fd = fs.openSync(paths.auditLog, "r+");
  try {
    const size = fs.fstatSync(fd).size;
    const torn = Buffer.alloc(size - goodBytes);
    fs.readSync(fd, torn, 0, torn.length, goodBytes);
    const quarantine = path.join(
      paths.home,
      `audit.torn-${new Date().toISOString().replaceAll(":", "")}.bin`,
    );
    fs.writeFileSync(quarantine, torn, { mode: 0o600, flush: true });
    fs.ftruncateSync(fd, goodBytes);
    fs.fsyncSync(fd);
    syncDir(paths.home);
    return {
      kind: "audit_repaired",
      torn_bytes: torn.length,
      torn_sha256: hash("sha256", torn, "hex"),
      quarantine_file: path.basename(quarantine),
    };
  } finally {
    fs.closeSync(fd);
  }
}
