import fs from "node:fs";
import path from "node:path";
import { syncDir } from "../internal/home.ts";
import { type HeadAnchor, writeAnchor, writeAnchorSync } from "./anchor.ts";
import { type AuditRow, encodeRow, type RowFields } from "./rows.ts";

/** A row as it appears in `GET /audit/recent`: the stored row plus its hash. */
export type HashedRow = AuditRow & { hash: string };

/** Position of the chain's head, as found by the start-up scan. */
export interface ChainHead {
  rows: number;
  headHash: string;
  bytes: number;
}

interface Waiter {
  resolve: () => void;
  reject: (error: Error) => void;
}

const RECENT_CAPACITY = 1000;

/** Options of {@link AuditLog.open}. */
export interface AuditLogOptions {
  /**
   * Keep the head anchor in this file (see {@link HeadAnchor}): written at open (after syncing the log),
   * after durable flushes (one write at a time, each naming the newest durable head) and at close.
   */
  anchorFile?: string;
  /** Least time between the starts of two anchor writes after flushes (default 20 ms). */
  anchorIntervalMs?: number;
}

/**
 * Append-only, hash-chained audit log with group commit.
 *
 * `append` assigns the row its `seq` and `prev` synchronously, so the chain order is the order in
 * which the event loop made decisions. Lines queue in memory; one write plus one `fdatasync` covers
 * every line queued since the previous flush, and the returned promise settles only after that
 * flush. Under load a flush carries as many rows as arrived during the previous one, which is how
 * durable throughput scales with concurrency.
 *
 * After a failed write or sync the log refuses further appends and rejects every row not yet
 * acknowledged (even one whose own sync later succeeds): the file may hold a partial line, and only a
 * restart (which scans and repairs the tail) can tell what is durable. Listeners registered with
 * {@link AuditLog.onFailure} hear of the failure once, when it happens. A failed write of the head
 * anchor stops the log the same way.
 */
export class AuditLog {
  private seq: number;
  private head: string;
  private queuedLines: string[] = [];
  private queuedRows: HashedRow[] = [];
  private queuedWaiters: Waiter[] = [];
  private flushing = false;
  private failure: Error | null = null;
  private readonly failureListeners: ((error: Error) => void)[] = [];
  private durableBytesCount: number;
  private durableRowsCount: number;
  private durableHeadHash: string;
  /** Settles when the newest appended row is durable (rows become durable in chain order). */
  private tail: Promise<void> = Promise.resolve();
  private readonly recentRows: HashedRow[] = [];
  /** Rows named by the last anchor written, and whether a write is in flight. */
  private anchoredRows: number;
  private anchorWriting = false;
  private anchorTimer: NodeJS.Timeout | null = null;
  private lastAnchorStart = Number.NEGATIVE_INFINITY;
  private closing = false;

  private constructor(
    private readonly fd: number,
    head: ChainHead,
    private readonly anchorFile: string | null,
    private readonly anchorIntervalMs: number,
  ) {
    this.anchoredRows = head.rows;
    this.seq = head.rows;
    this.head = head.headHash;
    this.durableBytesCount = head.bytes;
    this.durableRowsCount = head.rows;
    this.durableHeadHash = head.headHash;
  }

  /**
   * Opens `file` for appending after a scan found `head`. `recent` seeds `GET /audit/recent`.
   *
   * @example
   * const log = AuditLog.open(".authzd/audit.jsonl", { rows: 0, headHash: GENESIS_HASH, bytes: 0 }, []);
   */
  static open(file: string, head: ChainHead, recent: HashedRow[], options: AuditLogOptions = {}): AuditLog {
    let fd: number;
    try {
      fd = fs.openSync(file, "ax", 0o600);
      // A new file: its directory entry must survive a crash as much as the rows written to it.
      syncDir(path.dirname(file));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      fd = fs.openSync(file, "a", 0o600);
    }
    try {
      if (options.anchorFile !== undefined) {
        // The rows found by the scan may still be only in the page cache; the anchor may name only
        // durable rows, and answers are about to be drawn from them.
        fs.fdatasyncSync(fd);
        writeAnchorSync(options.anchorFile, { rows: head.rows, headHash: head.headHash });
      }
    } catch (error) {
      fs.closeSync(fd);
      throw error;
    }
    const log = new AuditLog(fd, head, options.anchorFile ?? null, options.anchorIntervalMs ?? 20);
    log.remember(recent.slice(-RECENT_CAPACITY));
    return log;
  }

  /**
   * Chains `fields` onto the log. The row (with its `seq`, `prev` and `time`) is returned at once;
   * `durable` resolves after it is on disk and rejects if the write failed.
   */
  append(fields: RowFields, time: Date = new Date()): { row: AuditRow; durable: Promise<void> } {
    if (this.failure !== null) throw this.failure;
    const row = { ...fields, seq: this.seq, prev: this.head, time: time.toISOString() } as AuditRow;
    const { line, hash } = encodeRow(row);
    this.seq++;
    this.head = hash;
    this.queuedLines.push(line);
    this.queuedRows.push({ ...row, hash });
    const durable = new Promise<void>((resolve, reject) => {
      this.queuedWaiters.push({ resolve, reject });
    });
    this.tail = durable;
    if (!this.flushing) this.flush();
    return { row, durable };
  }

  /**
   * Resolves once every row appended so far is durable; rejects if the log has failed. An answer that
   * reflects state built from appended rows waits for this, so it never reports a row that is lost.
   * The returned promise is the newest row's own `durable`, which its appender also awaits.
   */
  whenDurable(): Promise<void> {
    return this.failure === null ? this.tail : Promise.reject(this.failure);
  }

  /** Calls `listener` once if a write or sync fails (at once if it already has). */
  onFailure(listener: (error: Error) => void): void {
    if (this.failure !== null) listener(this.failure);
    else this.failureListeners.push(listener);
  }

  /** The failure that stopped the log, or null. */
  get failureCause(): Error | null {
    return this.failure;
  }

  /** Bytes of the file known to be complete and synced; verifying past them could see a line mid-write. */
  get durableBytes(): number {
    return this.durableBytesCount;
  }

  get durableRows(): number {
    return this.durableRowsCount;
  }

  /** Row count and hash of the last row that is known to be on disk. */
  get durableHead(): { rows: number; headHash: string } {
    return { rows: this.durableRowsCount, headHash: this.durableHeadHash };
  }

  /** The newest durable rows, oldest first; at most `limit` (and at most 1000). */
  recent(limit: number): HashedRow[] {
    return this.recentRows.slice(Math.max(0, this.recentRows.length - limit));
  }

  /**
   * Waits for queued rows to be flushed, records the final head anchor durably (marked `stopped`: no row
   * of this daemon follows it), then closes the file.
   */
  async close(): Promise<void> {
    this.closing = true;
    if (this.anchorTimer !== null) clearTimeout(this.anchorTimer);
    this.anchorTimer = null;
    while (this.flushing || this.queuedLines.length > 0 || this.anchorWriting) {
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
    try {
      if (this.anchorFile !== null && this.failure === null)
        writeAnchorSync(this.anchorFile, { ...this.durableHead, stopped: true });
    } finally {
      fs.closeSync(this.fd);
    }
  }

  private flush(): void {
    this.flushing = true;
    const data = Buffer.from(this.queuedLines.join(""), "utf8");
    const rows = this.queuedRows;
    const waiters = this.queuedWaiters;
    this.queuedLines = [];
    this.queuedRows = [];
    this.queuedWaiters = [];
    this.writeAll(data, 0, (error) => {
      if (error !== null) {
        this.flushed(error, waiters);
        return;
      }
      fs.fdatasync(this.fd, (syncError) => {
        if (syncError === null) {
          this.durableBytesCount += data.length;
          this.durableRowsCount += rows.length;
          this.durableHeadHash = (rows.at(-1) as HashedRow).hash;
          this.remember(rows);
        }
        this.flushed(syncError, waiters);
      });
    });
  }

  /** Ends one flush: acknowledges its rows, unless this or any other write has failed meanwhile. */
  private flushed(error: Error | null, waiters: Waiter[]): void {
    this.flushing = false;
    if (error !== null) this.fail(error);
    if (this.failure !== null) {
      for (const waiter of waiters) waiter.reject(this.failure);
      return;
    }
    for (const waiter of waiters) waiter.resolve();
    this.writeAnchorSoon();
    if (this.queuedLines.length > 0) this.flush();
  }

  /**
   * Records the durable head in the anchor file, off the reply path: one write at a time, started at
   * least `anchorIntervalMs` apart (each costs a sync of its own, which would otherwise compete with
   * the log's), each naming the newest durable head when it starts. So the anchor trails the log by
   * at most one interval plus one write; `close` brings it level.
   */
  private writeAnchorSoon(): void {
    if (this.anchorFile === null || this.anchorWriting || this.anchorTimer !== null) return;
    if (this.failure !== null || this.closing || this.anchoredRows === this.durableRowsCount) return;
    const wait = this.lastAnchorStart + this.anchorIntervalMs - performance.now();
    if (wait > 0) {
      this.anchorTimer = setTimeout(() => {
        this.anchorTimer = null;
        this.writeAnchorSoon();
      }, wait);
      return;
    }
    this.lastAnchorStart = performance.now();
    const head: HeadAnchor = this.durableHead;
    this.anchorWriting = true;
    writeAnchor(this.anchorFile, head).then(
      () => {
        this.anchorWriting = false;
        this.anchoredRows = head.rows;
        this.writeAnchorSoon();
      },
      (error: Error) => {
        this.anchorWriting = false;
        this.fail(error, "audit head anchor write failed");
      },
    );
  }

  private writeAll(data: Buffer, offset: number, done: (error: Error | null) => void): void {
    fs.write(this.fd, data, offset, data.length - offset, null, (error, written) => {
      if (error !== null) {
        done(error);
      } else if (offset + written < data.length) {
        this.writeAll(data, offset + written, done);
      } else {
        done(null);
      }
    });
  }

  /** Stops the log: rejects the queued rows, refuses new ones and tells the listeners (once). */
  private fail(error: Error, what = "audit log write failed"): void {
    if (this.failure !== null) return;
    const failure = new Error(`${what}: ${error.message}`, { cause: error });
    this.failure = failure;
    const queued = this.queuedWaiters;
    this.queuedLines = [];
    this.queuedRows = [];
    this.queuedWaiters = [];
    for (const waiter of queued) waiter.reject(failure);
    for (const listener of this.failureListeners.splice(0)) listener(failure);
  }

  private remember(rows: HashedRow[]): void {
    for (const row of rows) this.recentRows.push(row);
    if (this.recentRows.length > 2 * RECENT_CAPACITY) {
      this.recentRows.splice(0, this.recentRows.length - RECENT_CAPACITY);
    }
  }

  /** True once a write or sync has failed; the daemon then stops deciding. */
  get failed(): boolean {
    return this.failure !== null;
  }
}
