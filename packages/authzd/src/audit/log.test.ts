import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { eventually } from "../../../../test/support/eventually.ts";
import { readAnchorSync } from "./anchor.ts";
import { AuditLog } from "./log.ts";
import { GENESIS_HASH } from "./rows.ts";
import { scanAuditFileSync } from "./verify.ts";

const revoke = (i: number) => ({
  kind: "capability_revoked" as const,
  identity: `a${i}`,
  capability: "audit.read",
});

afterEach(() => {
  vi.restoreAllMocks();
});

describe("AuditLog", () => {
  it("chains concurrent appends in call order and resolves each once its batch is synced", async () => {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "authzd-log-")), "audit.jsonl");
    const log = AuditLog.open(file, { rows: 0, headHash: GENESIS_HASH, bytes: 0 }, []);
    const appended = Array.from({ length: 500 }, (_, i) => log.append(revoke(i)));
    expect(appended.map((a) => a.row.seq)).toEqual([...Array(500).keys()]);
    await Promise.all(appended.map((a) => a.durable));
    expect(log.durableRows).toBe(500);
    expect(log.durableBytes).toBe(fs.statSync(file).size);
    expect(log.recent(2).map((row) => row.seq)).toEqual([498, 499]);
    const { report } = scanAuditFileSync(file);
    expect(report).toMatchObject({ rows: 500, valid: true });
    await log.close();
  });

  it("rejects pending appends and refuses new ones after a failed write", async () => {
    // Every write to /dev/full fails with ENOSPC, like a full disk.
    const log = AuditLog.open("/dev/full", { rows: 0, headHash: GENESIS_HASH, bytes: 0 }, []);
    const first = log.append(revoke(0));
    const second = log.append(revoke(1));
    await expect(first.durable).rejects.toThrow(/audit log write failed: ENOSPC/);
    await expect(second.durable).rejects.toThrow(/audit log write failed/);
    expect(log.failed).toBe(true);
    expect(() => log.append(revoke(2))).toThrow(/audit log write failed/);
    expect(log.durableRows).toBe(0);
    expect(log.recent(10)).toEqual([]);
  });

  it("whenDurable waits for every row appended so far, and rejects once the log has failed", async () => {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "authzd-log-")), "audit.jsonl");
    const log = AuditLog.open(file, { rows: 0, headHash: GENESIS_HASH, bytes: 0 }, []);
    await log.whenDurable(); // nothing appended: resolves at once
    const held: ((error: NodeJS.ErrnoException | null) => void)[] = [];
    vi.spyOn(fs, "fdatasync").mockImplementation(((
      _fd: number,
      callback: (error: NodeJS.ErrnoException | null) => void,
    ) => {
      held.push(callback);
    }) as typeof fs.fdatasync);
    const first = log.append(revoke(0));
    const second = log.append(revoke(1)); // queued behind the first flush
    let barrierDone = false;
    const barrier = log.whenDurable().then(() => {
      barrierDone = true;
    });
    await eventually(() => held.length === 1);
    held[0]?.(null);
    await first.durable;
    expect(log.durableHead.rows).toBe(1);
    await eventually(() => held.length === 2);
    expect(barrierDone).toBe(false);
    held[1]?.(null);
    await second.durable;
    await barrier;
    expect(log.durableHead).toEqual({ rows: 2, headHash: log.recent(1)[0]?.hash });

    const failures: Error[] = [];
    log.onFailure((error) => failures.push(error));
    const third = log.append(revoke(2));
    await eventually(() => held.length === 3);
    const error: NodeJS.ErrnoException = new Error("EIO: i/o error, fdatasync");
    error.code = "EIO";
    held[2]?.(error);
    await expect(third.durable).rejects.toThrow(/audit log write failed: EIO/);
    await expect(log.whenDurable()).rejects.toThrow(/EIO/);
    expect(failures).toHaveLength(1);
    expect(log.durableHead.rows).toBe(2);
    log.onFailure((late) => failures.push(late)); // registered after the fact: told at once
    expect(failures).toHaveLength(2);
    await log.close();
  });

  it("records the durable head in the anchor file only after its rows are synced, and at close", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "authzd-log-"));
    const file = path.join(dir, "audit.jsonl");
    const anchorFile = path.join(dir, "audit.head");
    const log = AuditLog.open(file, { rows: 0, headHash: GENESIS_HASH, bytes: 0 }, [], { anchorFile });
    expect(readAnchorSync(anchorFile)).toEqual({ rows: 0, headHash: GENESIS_HASH });

    const held: ((error: NodeJS.ErrnoException | null) => void)[] = [];
    vi.spyOn(fs, "fdatasync").mockImplementation(((
      _fd: number,
      callback: (error: NodeJS.ErrnoException | null) => void,
    ) => {
      held.push(callback);
    }) as typeof fs.fdatasync);
    const first = log.append(revoke(0));
    await eventually(() => held.length === 1);
    for (let i = 0; i < 10; i++) await new Promise((resolve) => setImmediate(resolve));
    expect(readAnchorSync(anchorFile)).toEqual({ rows: 0, headHash: GENESIS_HASH }); // written, not synced
    held[0]?.(null);
    await first.durable;
    await eventually(() => readAnchorSync(anchorFile)?.rows === log.durableHead.rows);
    expect(readAnchorSync(anchorFile)).toEqual(log.durableHead);
    expect(log.durableHead.rows).toBe(1);

    vi.restoreAllMocks();
    await Promise.all(Array.from({ length: 50 }, (_, i) => log.append(revoke(i + 1)).durable));
    await log.close();
    const anchor = readAnchorSync(anchorFile);
    if (anchor === null) throw new Error("no anchor after close");
    expect(anchor).toEqual({ rows: 51, headHash: log.durableHead.headHash, stopped: true });
    expect(fs.existsSync(`${anchorFile}.tmp`)).toBe(false);
    expect(scanAuditFileSync(file, { anchor }).report).toMatchObject({
      rows: 51,
      valid: true,
    });
  });

  it("spaces anchor writes at least anchorIntervalMs apart, and brings the anchor level at close", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "authzd-log-"));
    const anchorFile = path.join(dir, "audit.head");
    const log = AuditLog.open(
      path.join(dir, "audit.jsonl"),
      { rows: 0, headHash: GENESIS_HASH, bytes: 0 },
      [],
      {
        anchorFile,
        anchorIntervalMs: 60_000,
      },
    );
    await log.append(revoke(0)).durable; // the first write after open goes at once
    await eventually(() => readAnchorSync(anchorFile)?.rows === 1);
    for (let i = 1; i <= 5; i++) await log.append(revoke(i)).durable;
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(readAnchorSync(anchorFile)?.rows).toBe(1); // the next one waits for the interval
    await log.close(); // does not wait for it either
    expect(readAnchorSync(anchorFile)).toEqual({ ...log.durableHead, stopped: true });
    expect(log.durableHead.rows).toBe(6);
  });

  it("stops, like after a failed log write, when the head anchor cannot be written", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "authzd-log-"));
    const log = AuditLog.open(
      path.join(dir, "audit.jsonl"),
      { rows: 0, headHash: GENESIS_HASH, bytes: 0 },
      [],
      {
        anchorFile: path.join(dir, "audit.head"),
      },
    );
    const failures: Error[] = [];
    log.onFailure((error) => failures.push(error));
    const error: NodeJS.ErrnoException = new Error("EROFS: read-only file system, rename");
    error.code = "EROFS";
    vi.spyOn(fs.promises, "rename").mockRejectedValue(error);
    await log.append(revoke(0)).durable; // the row itself was synced
    await eventually(() => failures.length === 1);
    expect(failures[0]?.message).toMatch(/audit head anchor write failed: EROFS/);
    expect(() => log.append(revoke(1))).toThrow(/head anchor/);
    await expect(log.whenDurable()).rejects.toThrow(/head anchor/);
    await log.close();
  });

  it("fsyncs the directory after creating the log file and after creating the anchor", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "authzd-log-"));
    const file = path.join(dir, "audit.jsonl");
    const events: string[] = [];
    const opened = new Map<number, string>();
    const { openSync, fsyncSync, renameSync } = fs;
    vi.spyOn(fs, "openSync").mockImplementation(((target: fs.PathLike, ...rest: never[]) => {
      const fd = (openSync as (...args: unknown[]) => number)(target, ...rest);
      opened.set(fd, String(target));
      events.push(`open ${String(target)}`);
      return fd;
    }) as typeof fs.openSync);
    vi.spyOn(fs, "fsyncSync").mockImplementation((fd: number) => {
      events.push(`fsync ${opened.get(fd) ?? fd}`);
      fsyncSync(fd);
    });
    vi.spyOn(fs, "renameSync").mockImplementation((from: fs.PathLike, to: fs.PathLike) => {
      events.push(`rename ${String(to)}`);
      renameSync(from, to);
    });
    const log = AuditLog.open(file, { rows: 0, headHash: GENESIS_HASH, bytes: 0 }, [], {
      anchorFile: path.join(dir, "audit.head"),
    });
    const created = events.indexOf(`open ${file}`);
    expect(created).toBeGreaterThanOrEqual(0);
    expect(events.indexOf(`fsync ${dir}`, created)).toBeGreaterThan(created);
    const anchored = events.indexOf(`rename ${path.join(dir, "audit.head")}`);
    expect(anchored).toBeGreaterThan(created);
    expect(events.indexOf(`fsync ${dir}`, anchored)).toBeGreaterThan(anchored);
    vi.restoreAllMocks();
    await log.close();
  });
});
