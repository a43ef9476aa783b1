import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { DataDirInUseError, lockDataDir } from "./data-dir-lock.ts";

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "svc-lock-"));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** The start time /proc gives a process (field 22 of its stat), as the lock records it. */
function startOf(pid: number): string {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19] as string;
}

describe("the data directory's lock", () => {
  it("is one process's: a lock naming a live process refuses; released, it is taken again", () => {
    const release = lockDataDir(dir);
    expect(() => lockDataDir(dir)).toThrow(DataDirInUseError);
    release();
    lockDataDir(dir)();
    // Another live process's (this one's parent), named with its start time.
    writeFileSync(join(dir, "svc.pid"), `${process.ppid} ${startOf(process.ppid)}\n`);
    expect(() => lockDataDir(dir)).toThrow(`another Svc (pid ${process.ppid})`);
  });

  it("takes over a lock whose process is gone, or whose pid another process has since (another start time)", () => {
    writeFileSync(join(dir, "svc.pid"), "2147483646\n");
    lockDataDir(dir)();
    writeFileSync(join(dir, "svc.pid"), `${process.ppid} 1\n`);
    const release = lockDataDir(dir);
    expect(readFileSync(join(dir, "svc.pid"), "utf8")).toBe(`${process.pid} ${startOf(process.pid)}\n`);
    release();
  });
});
