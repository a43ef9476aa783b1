import fs from "node:fs";
import path from "node:path";
import { syncDir } from "../internal/home.ts";
import { GENESIS_HASH } from "./rows.ts";

/**
 * The head anchor: how many rows of the log are known to be durable, and the hash of the last of them.
 * Kept in a small file beside the log (`audit.head` for `audit.jsonl`), so that rows cut off the end of
 * the log at a row boundary, which leave a chain that is valid on its own, are still detected. It is
 * written only after the rows it names were synced, so it may lag the log (after a crash) but never
 * claims a row that is not durable.
 */
export interface HeadAnchor {
  rows: number;
  headHash: string;
  /**
   * Written as the daemon stopped cleanly: every row it wrote is named, so a row after them is not the
   * daemon's (a crash leaves rows after an anchor written while running; a start rewrites the anchor, without
   * this, before it writes any). Rows chained on after a clean stop are refused, not replayed.
   */
  stopped?: true;
}

const HASH = /^[0-9a-f]{64}$/;

/**
 * The anchor file that belongs to a log: the log's name with `.head` for `.jsonl`, in the same directory.
 *
 * @example
 * anchorFileFor("/var/lib/authzd/audit.jsonl"); // "/var/lib/authzd/audit.head"
 */
export function anchorFileFor(logFile: string): string {
  const base = path.basename(logFile, ".jsonl");
  return path.join(path.dirname(logFile), `${base}.head`);
}

/** Thrown when an anchor file exists but does not hold an anchor (never the result of a crash). */
export class AnchorError extends Error {
  override readonly name = "AnchorError";
}

/**
 * What vouches for none of a log's `rows` rows, when nothing does: no anchor at `file`, or one that records
 * no rows (as written before the first). Rows cut off the log's end then go unnoticed, so the caller warns.
 * Undefined when the anchor vouches for some rows, or the log has none.
 * @example unanchored(readAnchorSync(file), report.rows, file) // "no head anchor at /home/.authzd/audit.head"
 */
export function unanchored(anchor: HeadAnchor | null, rows: number, file: string): string | undefined {
  if (rows === 0 || (anchor !== null && anchor.rows > 0)) return undefined;
  return anchor === null
    ? `no head anchor at ${file}`
    : `the head anchor at ${file} vouches for none of the log's rows`;
}

/**
 * Reads an anchor file; null when there is none. Throws {@link AnchorError} when the file is not an
 * anchor: it is replaced atomically, so a crash leaves the old or the new one, never a partial one.
 */
export function readAnchorSync(file: string): HeadAnchor | null {
  let text: string;
  try {
    text = fs.readFileSync(file, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw error;
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new AnchorError(`head anchor ${file} is not valid JSON`);
  }
  const anchor = value as Partial<HeadAnchor> | null;
  if (
    anchor === null ||
    typeof anchor !== "object" ||
    Object.keys(anchor).length !== ("stopped" in anchor ? 3 : 2) ||
    ("stopped" in anchor && anchor.stopped !== true) ||
    !Number.isSafeInteger(anchor.rows) ||
    (anchor.rows as number) < 0 ||
    typeof anchor.headHash !== "string" ||
    !HASH.test(anchor.headHash) ||
    (anchor.rows === 0 && anchor.headHash !== GENESIS_HASH)
  ) {
    throw new AnchorError(
      `head anchor ${file} is not {"rows": <count>, "headHash": "<sha256 hex>"} (with "stopped": true after a clean stop)`,
    );
  }
  return {
    rows: anchor.rows as number,
    headHash: anchor.headHash,
    ...(anchor.stopped === true ? { stopped: true as const } : {}),
  };
}

function encodeAnchor(anchor: HeadAnchor): string {
  return `${JSON.stringify({ rows: anchor.rows, headHash: anchor.headHash, ...(anchor.stopped ? { stopped: true } : {}) })}\n`;
}

/**
 * Replaces the anchor atomically and durably: temp file, fsync, rename, fsync of the directory (which
 * also makes a first creation durable). Used at start-up and at close.
 */
export function writeAnchorSync(file: string, anchor: HeadAnchor): void {
  const tmp = `${file}.tmp`;
  fs.writeFileSync(tmp, encodeAnchor(anchor), { mode: 0o600, flush: true });
  fs.renameSync(tmp, file);
  syncDir(path.dirname(file));
}

/**
 * Replaces the anchor atomically without blocking the event loop: temp file, fdatasync, rename. The
 * directory is not synced, so after a power loss the rename may be lost and the anchor lag (allowed);
 * the anchor file itself was created, and its directory synced, by {@link writeAnchorSync} at start-up.
 */
export async function writeAnchor(file: string, anchor: HeadAnchor): Promise<void> {
  const tmp = `${file}.tmp`;
  const handle = await fs.promises.open(tmp, "w", 0o600);
  try {
    await handle.writeFile(encodeAnchor(anchor));
    await handle.datasync();
  } finally {
    await handle.close();
  }
  await fs.promises.rename(tmp, file);
}
