import fs from "node:fs";
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

/**
 * Append-only, hash-chained audit log with group commit.
 *
 * `append` assigns the row its `seq` and `prev` synchronously, so the chain order is the order in
 * which the event loop made decisions. Lines queue in memory; one write plus one `fdatasync` covers
 * every line queued since the previous flush, and the returned promise settles only after that
 * flush. Under load a flush carries as many rows as arrived during the previous one, which is how
 * durable throughput scales with concurrency.
 *
 * After a failed write or sync the log refuses further appends: the file may hold a partial line,
 * and only a restart (which scans and repairs the tail) can tell what is durable.
 */
export class AuditLog {
  private seq: number;
  private head: string;
  private queuedLines: string[] = [];
  private queuedRows: HashedRow[] = [];
  private queuedWaiters: Waiter[] = [];
  private flushing = false;
  private failure: Error | null = null;
  private durableBytesCount: number;
  private durableRowsCount: number;
  private readonly recentRows: HashedRow[] = [];

  private constructor(
    private readonly fd: number,
    head: ChainHead,
  ) {
    this.seq = head.rows;
    this.head = head.headHash;
    this.durableBytesCount = head.bytes;
    this.durableRowsCount = head.rows;
  }

  /**
   * Opens `file` for appending after a scan found `head`. `recent` seeds `GET /audit/recent`.
   *
   * @example
   * const log = AuditLog.open(".authzd/audit.jsonl", { rows: 0, headHash: GENESIS_HASH, bytes: 0 }, []);
   */
  static open(file: string, head: ChainHead, recent: HashedRow[]): AuditLog {
    const fd = fs.openSync(file, "a", 0o600);
    const log = new AuditLog(fd, head);
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
    if (!this.flushing) this.flush();
    return { row, durable };
  }

  /** Bytes of the file known to be complete and synced; verifying past them could see a line mid-write. */
  get durableBytes(): number {
    return this.durableBytesCount;
  }

  get durableRows(): number {
    return this.durableRowsCount;
  }

  /** The newest durable rows, oldest first; at most `limit` (and at most 1000). */
  recent(limit: number): HashedRow[] {
    return this.recentRows.slice(Math.max(0, this.recentRows.length - limit));
  }

  /** Waits for queued rows to be flushed, then closes the file. */
  async close(): Promise<void> {
    while (this.flushing || this.queuedLines.length > 0) {
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
    fs.closeSync(this.fd);
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
        this.fail(error, waiters);
        return;
      }
      fs.fdatasync(this.fd, (syncError) => {
        if (syncError !== null) {
          this.fail(syncError, waiters);
          return;
        }
        this.durableBytesCount += data.length;
        this.durableRowsCount += rows.length;
        this.remember(rows);
        for (const waiter of waiters) waiter.resolve();
        this.flushing = false;
        if (this.queuedLines.length > 0) this.flush();
      });
    });
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

  private fail(error: Error, inFlight: Waiter[]): void {
    this.failure = new Error(`audit log write failed: ${error.message}`, { cause: error });
    for (const waiter of [...inFlight, ...this.queuedWaiters]) waiter.reject(this.failure);
    this.queuedLines = [];
    this.queuedRows = [];
    this.queuedWaiters = [];
    this.flushing = false;
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
