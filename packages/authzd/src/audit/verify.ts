import { hash } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import { Worker } from "node:worker_threads";
import type { HeadAnchor } from "./anchor.ts";
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
// Framing as bytes, copied into module constants: compared byte by byte on every line.
const PREFIX = Buffer.from(LINE_PREFIX, "latin1");
const MIDDLE = Buffer.from(LINE_MIDDLE, "latin1");
const HASH_AT = PREFIX.length;
const MIDDLE_AT = HASH_AT + 64;
const BODY_AT = BODY_OFFSET;

/** Whether `buf` holds `expected` at `at`. */
function bytesAt(buf: Buffer, at: number, expected: Buffer): boolean {
  for (let i = 0; i < expected.length; i++) {
    if (buf[at + i] !== expected[i]) return false;
  }
  return true;
}

/** Where a scan starts: the expected index and `prev` of its first row. */
interface ChainPosition {
  index: number;
  prev: string;
}

/** What a scan of a byte range found; ranges of one file are stitched into a {@link VerifyReport}. */
export interface RangeScan {
  /** Lines in the range, counting a torn last line. */
  lines: number;
  /** First line (0-based within the range) that does not verify. */
  bad: { line: number; problem: string } | null;
  /** `seq` and `prev` of the range's first row, when it verified on its own. */
  first: ChainPosition | null;
  /** Hash of the last row that verified, or null if none did. */
  lastGoodHash: string | null;
  goodBytes: number;
  torn: boolean;
  /** Hash of the verified row whose index (its `seq` in a range) is the watched one, if seen. */
  watched: string | null;
}

/**
 * Checks rows one line at a time; feed it whole lines in file order. Started at a known position
 * (the file's start), it checks every `seq` and `prev`. Started with `null` (a range in the middle of
 * the file, scanned by a worker), it takes `seq` and `prev` of the first row as given and reports
 * them, so the caller can check the link to the range before.
 */
class ChainScanner {
  private index = 0;
  private prev = GENESIS_HASH;
  private adopt: boolean;
  private first: ChainPosition | null = null;
  private lastGoodHash: string | null = null;
  private lines = 0;
  private goodBytes = 0;
  private bad: { line: number; problem: string } | null = null;
  private torn = false;
  private watched: string | null = null;

  constructor(
    private readonly onRow: ((row: AuditRow, hash: string) => void) | undefined,
    start: ChainPosition | null = { index: 0, prev: GENESIS_HASH },
    /** Row index whose hash to keep (the head anchor's last row); -1 for none. */
    private readonly watchIndex = -1,
  ) {
    this.adopt = start === null;
    if (start !== null) {
      this.index = start.index;
      this.prev = start.prev;
    }
  }

  line(buf: Buffer, start: number, end: number): void {
    this.lines++;
    if (this.bad !== null) return;
    const problem = this.check(buf, start, end);
    if (problem === null) {
      this.goodBytes += end - start + 1;
    } else {
      this.bad = { line: this.lines - 1, problem };
    }
  }

  tail(bytes: number): void {
    if (bytes === 0) return;
    this.lines++;
    if (this.bad !== null) return;
    this.bad = { line: this.lines - 1, problem: `torn last line: ${bytes} bytes without a newline` };
    this.torn = true;
  }

  range(): RangeScan {
    return {
      lines: this.lines,
      bad: this.bad,
      first: this.first,
      lastGoodHash: this.lastGoodHash,
      goodBytes: this.goodBytes,
      torn: this.torn,
      watched: this.watched,
    };
  }

  /** Returns a problem description, or null when the row verifies and extends the chain. */
  private check(buf: Buffer, start: number, end: number): string | null {
    if (
      end - start < BODY_AT + 2 ||
      !bytesAt(buf, start, PREFIX) ||
      !bytesAt(buf, start + MIDDLE_AT, MIDDLE) ||
      buf[end - 1] !== CLOSE_BRACE
    ) {
      return "line is not framed as an audit row";
    }
    const stored = buf.toString("latin1", start + HASH_AT, start + MIDDLE_AT);
    const body = buf.subarray(start + BODY_AT, end - 1);
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
    if (typeof parsed.kind !== "string" || typeof parsed.time !== "string") return "row lacks kind or time";
    if (this.adopt) {
      if (typeof parsed.seq !== "number" || typeof parsed.prev !== "string") return "row lacks seq or prev";
      this.adopt = false;
      this.index = parsed.seq;
      this.prev = parsed.prev;
      this.first = { index: parsed.seq, prev: parsed.prev };
    }
    if (parsed.seq !== this.index) return `row seq is ${String(parsed.seq)}, expected ${this.index}`;
    if (parsed.prev !== this.prev) return "prev does not match the hash of the row before";
    this.prev = stored;
    this.lastGoodHash = stored;
    if (this.index === this.watchIndex) this.watched = stored;
    this.index++;
    this.onRow?.(parsed as unknown as AuditRow, stored);
    return null;
  }
}

/** The row index whose hash a scan must keep to check `anchor`; -1 when there is nothing to check. */
function watchIndexFor(anchor: HeadAnchor | undefined): number {
  return anchor === undefined ? -1 : anchor.rows - 1;
}

/**
 * Compares a file's own report with the head anchor. The log must hold at least `anchor.rows` verified
 * rows, and row `anchor.rows - 1` must hash to `anchor.headHash`; otherwise the first missing row, or
 * the anchored last row, is the first bad index (unless the file's own fault comes earlier). A torn
 * last line among the anchored rows is not a crash mid-write (those rows had been synced), so
 * `anchorHolds` is false and start-up will not cut it off as a torn tail.
 *
 * @param goodRows verified rows at the start of the file
 * @param watched hash of row `anchor.rows - 1` as the scan found it (null if it did not verify)
 */
function withAnchor(
  report: VerifyReport,
  goodRows: number,
  watched: string | null,
  anchor: HeadAnchor | undefined,
  torn: boolean,
): { report: VerifyReport; anchorHolds: boolean } {
  if (anchor === undefined) return { report, anchorHolds: true };
  let fault: { index: number; problem: string } | null = null;
  if (anchor.stopped && goodRows > anchor.rows) {
    fault = {
      index: anchor.rows,
      problem: `${goodRows - anchor.rows} rows follow the head anchor written when authzd last stopped cleanly: authzd did not write them`,
    };
  } else if (anchor.rows === 0) {
    return { report, anchorHolds: true };
  } else if (goodRows < anchor.rows) {
    fault = {
      index: goodRows,
      problem: `the log ends after ${goodRows} rows but the head anchor records ${anchor.rows}`,
    };
  } else if (watched !== anchor.headHash) {
    fault = {
      index: anchor.rows - 1,
      problem: `row ${anchor.rows - 1} does not hash to the head anchor's headHash`,
    };
  }
  if (fault === null) return { report, anchorHolds: true };
  if (!report.valid && (report.firstBadIndex as number) <= fault.index) {
    if (!torn) return { report, anchorHolds: false };
    const problem = `${report.problem}, but the head anchor records ${anchor.rows} rows as durable`;
    return { report: { ...report, problem }, anchorHolds: false };
  }
  return {
    report: { ...report, valid: false, firstBadIndex: fault.index, problem: fault.problem },
    anchorHolds: false,
  };
}

/** Turns the scan of a whole file (started at row 0) into a report, checked against `anchor`. */
function wholeFileResult(scan: RangeScan, anchor?: HeadAnchor): ScanResult {
  const own: VerifyReport = {
    rows: scan.lines,
    valid: scan.bad === null,
    headHash: scan.lastGoodHash ?? GENESIS_HASH,
  };
  if (scan.bad !== null) {
    own.firstBadIndex = scan.bad.line;
    own.problem = scan.bad.problem;
  }
  const goodRows = scan.bad === null ? scan.lines : scan.bad.line;
  const { report, anchorHolds } = withAnchor(own, goodRows, scan.watched, anchor, scan.torn);
  return { report, goodBytes: scan.goodBytes, goodRows, tornTailOnly: scan.torn && anchorHolds };
}

/**
 * Stitches the scans of consecutive ranges of one file into a report: each range's first row must
 * continue the chain where the range before ended. With `anchor`, the ranges must have been scanned
 * watching row `anchor.rows - 1`, and the report is checked against the anchor.
 *
 * @example
 * const report = stitchRanges([scanA, scanB]);
 */
export function stitchRanges(scans: RangeScan[], anchor?: HeadAnchor): VerifyReport {
  const own = stitchOwn(scans);
  const goodRows = own.report.valid ? own.report.rows : (own.report.firstBadIndex as number);
  // Take the first range that saw the watched row: a later one may carry a forged seq.
  const watched = scans.find((scan) => scan.watched !== null)?.watched ?? null;
  return withAnchor(own.report, goodRows, watched, anchor, own.torn).report;
}

function stitchOwn(scans: RangeScan[]): { report: VerifyReport; torn: boolean } {
  const rows = scans.reduce((sum, scan) => sum + scan.lines, 0);
  let offset = 0;
  let prev = GENESIS_HASH;
  const invalid = (index: number, problem: string, headHash: string, torn = false) => ({
    report: { rows, valid: false, headHash, firstBadIndex: index, problem } as VerifyReport,
    torn,
  });
  for (const scan of scans) {
    if (scan.lines === 0) continue;
    if (scan.first !== null) {
      if (scan.first.index !== offset) {
        return invalid(offset, `row seq is ${scan.first.index}, expected ${offset}`, prev);
      }
      if (scan.first.prev !== prev)
        return invalid(offset, "prev does not match the hash of the row before", prev);
    }
    if (scan.bad !== null)
      return invalid(offset + scan.bad.line, scan.bad.problem, scan.lastGoodHash ?? prev, scan.torn);
    prev = scan.lastGoodHash ?? prev;
    offset += scan.lines;
  }
  return { report: { rows, valid: true, headHash: prev }, torn: false };
}

/** Options for scanning a log file. */
export interface ScanOptions {
  /** Called with each verified row and its hash, in order (start-up replays state through it). */
  onRow?: (row: AuditRow, hash: string) => void;
  /** Only the first `limitBytes` bytes are read (the running daemon passes its durable length). */
  limitBytes?: number;
  /** Read size; smaller chunks keep the event loop responsive in the async variant. */
  chunkBytes?: number;
  /** Head anchor to check the log against (see {@link HeadAnchor}). */
  anchor?: HeadAnchor;
}

/**
 * Feeds whole lines to the scanner. Chunks are read into `space()` after the partial line left over
 * from the previous chunk, so a large read is never copied; only the short carry moves.
 */
class LineSplitter {
  private buf: Buffer;
  private carry = 0;

  constructor(
    private readonly scanner: ChainScanner,
    chunkBytes: number,
  ) {
    this.buf = Buffer.allocUnsafe(chunkBytes);
  }

  /** Where the next read goes; grows the buffer when a single line is longer than the free space. */
  space(): Buffer {
    if (this.carry * 2 > this.buf.length) {
      const bigger = Buffer.allocUnsafe(this.buf.length * 2);
      this.buf.copy(bigger, 0, 0, this.carry);
      this.buf = bigger;
    }
    return this.buf.subarray(this.carry);
  }

  /** Takes `n` bytes just read into `space()`. */
  filled(n: number): void {
    const end = this.carry + n;
    const buf = this.buf;
    let start = 0;
    for (
      let nl = buf.indexOf(NEWLINE, this.carry);
      nl !== -1 && nl < end;
      nl = buf.indexOf(NEWLINE, nl + 1)
    ) {
      this.scanner.line(buf, start, nl);
      start = nl + 1;
    }
    buf.copy(buf, 0, start, end);
    this.carry = end - start;
  }

  end(): RangeScan {
    this.scanner.tail(this.carry);
    return this.scanner.range();
  }
}

/** Reads bytes [from, to) of an open file into the splitter, synchronously. */
function readRangeSync(fd: number, from: number, to: number, splitter: LineSplitter): void {
  for (let position = from; position < to; ) {
    const space = splitter.space();
    const n = fs.readSync(fd, space, 0, Math.min(space.length, to - position), position);
    if (n === 0) break;
    position += n;
    splitter.filled(n);
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
  const scanner = new ChainScanner(options.onRow, undefined, watchIndexFor(options.anchor));
  const splitter = new LineSplitter(scanner, options.chunkBytes ?? 16 << 20);
  let fd: number;
  try {
    fd = fs.openSync(file, "r");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT")
      return wholeFileResult(splitter.end(), options.anchor);
    throw error;
  }
  try {
    const to = Math.min(fs.fstatSync(fd).size, options.limitBytes ?? Number.POSITIVE_INFINITY);
    readRangeSync(fd, 0, to, splitter);
  } finally {
    fs.closeSync(fd);
  }
  return wholeFileResult(splitter.end(), options.anchor);
}

/**
 * Scans bytes [from, to) of a log, where `from` is the start of a line. A range that does not start
 * the file takes its first row's `seq` and `prev` as given; {@link stitchRanges} checks the links.
 *
 * @example
 * const scans = [scanRangeSync(file, 0, mid), scanRangeSync(file, mid, size)];
 */
export function scanRangeSync(
  file: string,
  from: number,
  to: number,
  chunkBytes = 16 << 20,
  watchIndex = -1,
): RangeScan {
  const splitter = new LineSplitter(
    new ChainScanner(undefined, from === 0 ? undefined : null, watchIndex),
    Math.max(1, Math.min(chunkBytes, to - from)),
  );
  const fd = fs.openSync(file, "r");
  try {
    readRangeSync(fd, from, to, splitter);
  } finally {
    fs.closeSync(fd);
  }
  return splitter.end();
}

/**
 * Same checks as {@link scanAuditFileSync}, reading in small chunks so that a running daemon keeps
 * answering requests while it verifies a log on one thread.
 *
 * @example
 * const report = await verifyAuditFile(".authzd/audit.jsonl", { limitBytes: durableBytes });
 */
export async function verifyAuditFile(file: string, options: ScanOptions = {}): Promise<VerifyReport> {
  const scanner = new ChainScanner(options.onRow, undefined, watchIndexFor(options.anchor));
  const splitter = new LineSplitter(scanner, options.chunkBytes ?? 1 << 20);
  let handle: fs.promises.FileHandle;
  try {
    handle = await fs.promises.open(file, "r");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT")
      return wholeFileResult(splitter.end(), options.anchor).report;
    throw error;
  }
  try {
    let remaining = options.limitBytes ?? Number.POSITIVE_INFINITY;
    while (remaining > 0) {
      const space = splitter.space();
      const { bytesRead } = await handle.read(space, 0, Math.min(space.length, remaining), null);
      if (bytesRead === 0) break;
      remaining -= bytesRead;
      splitter.filled(bytesRead);
    }
  } finally {
    await handle.close();
  }
  return wholeFileResult(splitter.end(), options.anchor).report;
}

/** Below this size one thread verifies faster than starting workers. */
const PARALLEL_MIN_BYTES = 32 << 20;

/** Options for {@link verifyAuditFileParallel}. */
export interface ParallelVerifyOptions {
  /** Only the first `limitBytes` bytes are verified. */
  limitBytes?: number;
  /** Worker threads; default: 1 below 32 MiB, else the available parallelism (at most 4). */
  threads?: number;
  /** Head anchor to check the log against (see {@link HeadAnchor}). */
  anchor?: HeadAnchor;
}

/**
 * Verifies a log with worker threads: the file is cut at line boundaries into one range per thread,
 * each worker checks hashes, encoding and links inside its range, and the ranges are stitched. Gives
 * the same report as the single-threaded scan, and keeps the event loop free while it runs.
 *
 * @example
 * const report = await verifyAuditFileParallel(".authzd/audit.jsonl", { threads: 2 });
 */
export async function verifyAuditFileParallel(
  file: string,
  options: ParallelVerifyOptions = {},
): Promise<VerifyReport> {
  let size: number;
  try {
    size = (await fs.promises.stat(file)).size;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") {
      const empty = { rows: 0, valid: true, headHash: GENESIS_HASH };
      return withAnchor(empty, 0, null, options.anchor, false).report;
    }
    throw error;
  }
  size = Math.min(size, options.limitBytes ?? Number.POSITIVE_INFINITY);
  const threads =
    options.threads ?? (size >= PARALLEL_MIN_BYTES ? Math.min(4, os.availableParallelism()) : 1);
  const loader = tsxLoaderUrl();
  const { anchor } = options;
  if (threads <= 1 || loader === undefined) {
    return verifyAuditFile(file, { limitBytes: size, ...(anchor === undefined ? {} : { anchor }) });
  }
  const bounds = await lineBoundaries(file, size, threads);
  const watchIndex = watchIndexFor(anchor);
  const scans = await Promise.all(
    bounds.slice(1).map((to, i) => scanInWorker(loader, file, bounds[i] as number, to, watchIndex)),
  );
  return stitchRanges(scans, anchor);
}

/** Offsets [0, …, size] that cut the file into about `parts` ranges, each starting at a line start. */
async function lineBoundaries(file: string, size: number, parts: number): Promise<number[]> {
  const bounds = [0];
  const handle = await fs.promises.open(file, "r");
  try {
    const window = Buffer.allocUnsafe(1 << 16);
    for (let i = 1; i < parts; i++) {
      const at = Math.max(bounds.at(-1) as number, Math.floor((size * i) / parts));
      const { bytesRead } = await handle.read(window, 0, Math.min(window.length, size - at), at);
      const nl = window.subarray(0, bytesRead).indexOf(NEWLINE);
      if (nl !== -1 && at + nl + 1 < size) bounds.push(at + nl + 1);
    }
  } finally {
    await handle.close();
  }
  bounds.push(size);
  return bounds;
}

/** The URL of tsx's registration API, which workers need to load this TypeScript; undefined if absent. */
function tsxLoaderUrl(): string | undefined {
  try {
    return import.meta.resolve("tsx/esm/api");
  } catch {
    return undefined;
  }
}

function scanInWorker(
  loader: string,
  file: string,
  from: number,
  to: number,
  watchIndex: number,
): Promise<RangeScan> {
  const entry = new URL("./verify-worker.ts", import.meta.url).href;
  // Workers do not inherit the TypeScript loader of the main thread; the entry registers it first.
  const code = `import(${JSON.stringify(loader)}).then(({ register }) => { register(); return import(${JSON.stringify(entry)}); })`;
  return new Promise((resolve, reject) => {
    const worker = new Worker(code, { eval: true, workerData: { file, from, to, watchIndex } });
    worker.once("message", (scan: RangeScan) => resolve(scan));
    worker.once("error", reject);
    worker.once("exit", (code) => {
      if (code !== 0) reject(new Error(`verify worker exited with code ${code}`));
    });
  });
}
