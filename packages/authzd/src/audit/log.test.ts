import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
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
    await vi.waitFor(() => expect(held).toHaveLength(1));
    held[0]?.(null);
    await first.durable;
    expect(log.durableHead.rows).toBe(1);
    await vi.waitFor(() => expect(held).toHaveLength(2));
    expect(barrierDone).toBe(false);
    held[1]?.(null);
    await second.durable;
    await barrier;
    expect(log.durableHead).toEqual({ rows: 2, headHash: log.recent(1)[0]?.hash });

    const failures: Error[] = [];
    log.onFailure((error) => failures.push(error));
    const third = log.append(revoke(2));
    await vi.waitFor(() => expect(held).toHaveLength(3));
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
});
