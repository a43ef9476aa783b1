import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { AuditLog } from "./log.ts";
import { GENESIS_HASH } from "./rows.ts";
import { scanAuditFileSync } from "./verify.ts";

const revoke = (i: number) => ({
  kind: "capability_revoked" as const,
  identity: `a${i}`,
  capability: "audit.read",
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
});
