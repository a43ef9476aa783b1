import { hash } from "node:crypto";
import fs from "node:fs";
import { isCanonicalText, type JsonValue } from "./canonical.ts";
import { type AuditRow, BODY_OFFSET, GENESIS_HASH, LINE_MIDDLE, LINE_PREFIX } from "./rows.ts";

/** Result of checking an audit log, as returned by `GET /audit/verify` and `authzd audit verify`. */
export interface VerifyReport {
  /** Rows in the file, counting a torn last line as a row. */
  rows: number;
  valid: boolean;
  /** Hash of the last row that verified (the chain head when valid; all zeros for an empty log). */
  headHash: string;
  /** 0-based index of the first row that does not verify. */
  firstBadIndex?: number;
  /** What is wrong with the first bad row. */
  problem?: string;
}

/** A verify report plus what start-up needs to repair a torn tail. */
export interface ScanResult {
  report: VerifyReport;
  /** Byte length of the prefix made of whole, verified rows. */
  goodBytes: number;
  /** Number of whole, verified rows at the start of the file. */
  goodRows: number;
  /** True when the only fault is a last line without its newline (a write cut short by a crash). */
  tornTailOnly: boolean;
}

const NEWLINE = 0x0a;
const CLOSE_BRACE = 0x7d;

/** Checks rows one line at a time; feed it whole lines in file order. */
class ChainScanner {
  private index = 0;
  private prev = GENESIS_HASH;
  private lines = 0;
  private goodBytes = 0;
  private bad: { index: number; problem: string } | null = null;
  private torn = false;

  constructor(private readonly onRow: ((row: AuditRow, hash: string) => void) | undefined) {}

  line(buf: Buffer, start: number, end: number): void {
    this.lines++;
    if (this.bad !== null) return;
    const problem = this.check(buf, start, end);
    if (problem === null) {
      this.goodBytes += end - start + 1;
    } else {
      this.bad = { index: this.index, problem };
    }
  }

  tail(bytes: number): void {
    if (bytes === 0) return;
    this.lines++;
    if (this.bad !== null) return;
    this.bad = { index: this.index, problem: `torn last line: ${bytes} bytes without a newline` };
    this.torn = true;
  }

  result(): ScanResult {
    const report: VerifyReport = { rows: this.lines, valid: this.bad === null, headHash: this.prev };
    if (this.bad !== null) {
      report.firstBadIndex = this.bad.index;
      report.problem = this.bad.problem;
    }
    return { report, goodBytes: this.goodBytes, goodRows: this.index, tornTailOnly: this.torn };
  }

  /** Returns a problem description, or null when the row verifies and extends the chain. */
  private check(buf: Buffer, start: number, end: number): string | null {
    if (
      end - start < BODY_OFFSET + 2 ||
      buf.toString("latin1", start, start + LINE_PREFIX.length) !== LINE_PREFIX ||
      buf.toString("latin1", start + LINE_PREFIX.length + 64, start + BODY_OFFSET) !== LINE_MIDDLE ||
      buf[end - 1] !== CLOSE_BRACE
    ) {
      return "line is not framed as an audit row";
    }
    const stored = buf.toString("latin1", start + LINE_PREFIX.length, start + LINE_PREFIX.length + 64);
    const body = buf.subarray(start + BODY_OFFSET, end - 1);
    if (hash("sha256", body, "hex") !== stored) return "row hash does not match its contents";
    const text = body.toString("utf8");
    let parsed: JsonValue;
    try {
      parsed = JSON.parse(text) as JsonValue;
    } catch {
      return "row is not valid JSON";
    }
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) return "row is not an object";
    if (!isCanonicalText(text, parsed)) return "row is not canonically encoded";
    if (parsed.seq !== this.index) return `row seq is ${String(parsed.seq)}, expected ${this.index}`;
    if (parsed.prev !== this.prev) return "prev does not match the hash of the row before";
    if (typeof parsed.kind !== "string" || typeof parsed.time !== "string") return "row lacks kind or time";
    this.prev = stored;
    this.index++;
    this.onRow?.(parsed as unknown as AuditRow, stored);
    return null;
  }
}

/** Options for scanning a log file. */
export interface ScanOptions {
  /** Called with each verified row and its hash, in order (start-up replays state through it). */
  onRow?: (row: AuditRow, hash: string) => void;
  /** Only the first `limitBytes` bytes are read (the running daemon passes its durable length). */
  limitBytes?: number;
  /** Read size; smaller chunks keep the event loop responsive in the async variant. */
  chunkBytes?: number;
}

/** Splits chunks into lines and feeds the scanner; carries a partial line to the next chunk. */
class LineSplitter {
  private carry: Buffer = Buffer.alloc(0);
  constructor(private readonly scanner: ChainScanner) {}

  push(chunk: Buffer): void {
    const buf = this.carry.length > 0 ? Buffer.concat([this.carry, chunk]) : chunk;
    let start = 0;
    for (let nl = buf.indexOf(NEWLINE, start); nl !== -1; nl = buf.indexOf(NEWLINE, start)) {
      this.scanner.line(buf, start, nl);
      start = nl + 1;
    }
    // Copy: the chunk buffer is reused by the reader.
    this.carry = Buffer.from(buf.subarray(start));
  }

  end(): ScanResult {
    this.scanner.tail(this.carry.length);
    return this.scanner.result();
  }
}

/**
 * Verifies an audit log synchronously: hash of every row, canonical encoding, `seq` and the `prev`
 * link, and a torn last line. A missing file is an empty, valid chain.
 *
 * @example
 * const { report } = scanAuditFileSync(".authzd/audit.jsonl");
 * if (!report.valid) console.error(`bad row at ${report.firstBadIndex}: ${report.problem}`);
 */
export function scanAuditFileSync(file: string, options: ScanOptions = {}): ScanResult {
  const splitter = new LineSplitter(new ChainScanner(options.onRow));
  let fd: number;
  try {
    fd = fs.openSync(file, "r");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return splitter.end();
    throw error;
  }
  try {
    const chunk = Buffer.allocUnsafe(options.chunkBytes ?? 16 << 20);
    let remaining = options.limitBytes ?? Number.POSITIVE_INFINITY;
    while (remaining > 0) {
      const n = fs.readSync(fd, chunk, 0, Math.min(chunk.length, remaining), null);
      if (n === 0) break;
      remaining -= n;
      splitter.push(chunk.subarray(0, n));
    }
  } finally {
    fs.closeSync(fd);
  }
  return splitter.end();
}

/**
 * Same checks as {@link scanAuditFileSync}, reading in small chunks so that a running daemon keeps
 * answering requests while it verifies a large log.
 *
 * @example
 * const report = await verifyAuditFile(".authzd/audit.jsonl", { limitBytes: durableBytes });
 */
export async function verifyAuditFile(file: string, options: ScanOptions = {}): Promise<VerifyReport> {
  const splitter = new LineSplitter(new ChainScanner(options.onRow));
  let handle: fs.promises.FileHandle;
  try {
    handle = await fs.promises.open(file, "r");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return splitter.end().report;
    throw error;
  }
  try {
    const chunk = Buffer.allocUnsafe(options.chunkBytes ?? 1 << 20);
    let remaining = options.limitBytes ?? Number.POSITIVE_INFINITY;
    while (remaining > 0) {
      const { bytesRead } = await handle.read(chunk, 0, Math.min(chunk.length, remaining), null);
      if (bytesRead === 0) break;
      remaining -= bytesRead;
      splitter.push(chunk.subarray(0, bytesRead));
    }
  } finally {
    await handle.close();
  }
  return splitter.end().report;
}
