import { linkSync, mkdirSync, readFileSync, rmdirSync, rmSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/**
 * Another live process holds the data directory: two services on one embedded store corrupt it (PGlite is
 * one process's database), and the wallets' sealed keys are in it.
 */
export class DataDirInUseError extends Error {
  override name = "DataDirInUseError";
  constructor(dir: string, pid: number) {
    super(
      `another Svc (pid ${pid}) is using ${dir}; stop it, or give this one its own SVC_DATA_DIR (and PORT)`,
    );
  }
}

/** How long a start waits for another start's takeover of a stale lock to end. */
const TAKEOVER_WAIT_MS = 5_000;

/** The lock files this process holds: one naming this pid but not held here is a former process's. */
const held = new Set<string>();

/**
 * Takes the data directory for this process (`svc.pid` in it, naming this process), and returns its release.
 * A lock whose process is gone (a crash, a SIGKILL) is taken over, one process at a time; one whose process
 * lives refuses with {@link DataDirInUseError}.
 * @example const release = lockDataDir("./.svc-data"); … release();
 */
export function lockDataDir(dir: string): () => void {
  const pidFile = join(dir, "svc.pid");
  const takeover = `${pidFile}.takeover`;
  const deadline = Date.now() + TAKEOVER_WAIT_MS;
  for (;;) {
    if (createWhole(pidFile, `${[process.pid, startTimeOf(process.pid)].filter(Boolean).join(" ")}\n`)) {
      held.add(pidFile);
      return () => {
        if (!held.delete(pidFile)) return;
        const owner = ownerOf(pidFile);
        if (typeof owner === "object" && owner.pid === process.pid) rmSync(pidFile, { force: true });
      };
    }
    const owner = ownerOf(pidFile);
    if (typeof owner === "object" && isAlive(owner, pidFile)) throw new DataDirInUseError(dir, owner.pid);
    if (owner === "absent") continue;
    try {
      mkdirSync(takeover, { mode: 0o700 });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      if (Date.now() > deadline) {
        throw new Error(`${takeover} stays: a takeover was interrupted; remove it if no Svc uses ${dir}`);
      }
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20);
      continue;
    }
    try {
      // Read again under the takeover: only a lock naming no live process goes (one made meanwhile stays).
      const now = ownerOf(pidFile);
      if (now !== "absent" && !(typeof now === "object" && isAlive(now, pidFile)))
        rmSync(pidFile, { force: true });
    } finally {
      rmdirSync(takeover);
    }
  }
}

/** Creates `file` holding `text`, whole and atomically (written aside, then linked); false if it exists. */
function createWhole(file: string, text: string): boolean {
  const own = `${file}.${process.pid}.tmp`;
  writeFileSync(own, text, { mode: 0o600 });
  try {
    linkSync(own, file);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw error;
  } finally {
    unlinkSync(own);
  }
}

/** The process a lock file names (its pid, and its start time where known); "absent"; "unreadable". */
function ownerOf(file: string): { pid: number; start?: string } | "absent" | "unreadable" {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return "absent";
    throw error;
  }
  const [pidText = "", start] = text.trim().split(" ");
  const pid = Number(pidText);
  if (!Number.isSafeInteger(pid) || pid <= 0) return "unreadable";
  return start ? { pid, start } : { pid };
}

/**
 * When a process started, in clock ticks since boot (Linux's /proc/<pid>/stat, field 22): a pid reused by
 * another process (after a reboot, in a new container) starts at another time. Undefined where unknown.
 */
function startTimeOf(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name (field 2) is in parentheses and may hold spaces: count from field 3, after it.
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
  } catch {
    return undefined;
  }
}

/**
 * Whether the process a lock names runs, and holds `pidFile`: a former process may have had this process's
 * pid (a container's 1), or another process the former one's.
 */
function isAlive(owner: { pid: number; start?: string }, pidFile: string): boolean {
  if (owner.pid === process.pid) return held.has(pidFile);
  try {
    process.kill(owner.pid, 0);
  } catch (error) {
    // EPERM: it lives, as another user's.
    if ((error as NodeJS.ErrnoException).code !== "EPERM") return false;
  }
  const start = startTimeOf(owner.pid);
  return owner.start === undefined || start === undefined || start === owner.start;
}
