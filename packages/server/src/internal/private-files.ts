import { chmodSync, lstatSync, mkdirSync, readdirSync } from "node:fs";
import { join } from "node:path";

/** Mode of every directory the service keeps secrets or data in: owner only. */
export const PRIVATE_DIR_MODE = 0o700;
/** Mode of every file in those directories: owner read/write only. */
export const PRIVATE_FILE_MODE = 0o600;

/**
 * Creates `dir` (and its missing parents) readable by its owner only, and narrows an existing one. `mkdir`'s
 * mode is filtered by the umask and ignored for a directory that already exists, hence the chmod.
 */
export function ensurePrivateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  chmodSync(dir, PRIVATE_DIR_MODE);
}

/**
 * Narrows every directory under `root` (itself included) to 0700 and every file to 0600. PGlite unpacks its
 * initial database with modes recorded in its archive (0666 files, 0755 directories), whatever the umask.
 */
export function restrictTree(root: string): void {
  const stat = lstatSync(root);
  if (stat.isSymbolicLink()) return;
  if (stat.isDirectory()) {
    chmodSync(root, PRIVATE_DIR_MODE);
    for (const entry of readdirSync(root)) restrictTree(join(root, entry));
  } else if (stat.isFile()) {
    chmodSync(root, PRIVATE_FILE_MODE);
  }
}

/**
 * Makes every file this process creates from now on private (umask 077). PGlite's emulated file system
 * opens files with Node's default mode (0666), so only the process umask keeps the files it writes later
 * (new tables, indexes, caches) from being readable by other users.
 */
export function restrictUmask(): void {
  try {
    process.umask(0o077);
  } catch {
    // Worker threads cannot change the umask; the files written there keep the inherited one.
  }
}
