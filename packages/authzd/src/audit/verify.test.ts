import { createHash } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { canonicalJson, type JsonValue } from "./canonical.ts";
import { type AuditRow, encodeRow, GENESIS_HASH } from "./rows.ts";
import { scanAuditFileSync, scanRangeSync, stitchRanges, verifyAuditFile } from "./verify.ts";

/** A chain of `n` revocation rows as log lines. */
function chain(n: number): string[] {
  const lines: string[] = [];
  let prev = GENESIS_HASH;
  for (let seq = 0; seq < n; seq++) {
    const row: AuditRow = {
      kind: "capability_revoked",
      identity: `agent-${seq}`,
      capability: "wallet.spend.authorize",
      seq,
      prev,
      time: new Date(1_700_000_000_000 + seq).toISOString(),
    };
    const { line, hash } = encodeRow(row);
    lines.push(line);
    prev = hash;
  }
  return lines;
}

function write(text: string | Buffer): string {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "authzd-verify-")), "audit.jsonl");
  fs.writeFileSync(file, text);
  return file;
}

/**
 * Verifies `text` whole, and also cut into ranges at every line boundary (as worker threads scan it)
 * and stitched; both must agree.
 */
function verify(text: string | Buffer) {
  const file = write(text);
  const whole = scanAuditFileSync(file, { chunkBytes: 333 }).report;
  const bytes = Buffer.from(text);
  const starts = [0];
  for (let i = bytes.indexOf(0x0a); i !== -1 && i + 1 < bytes.length; i = bytes.indexOf(0x0a, i + 1))
    starts.push(i + 1);
  for (const cut of starts.slice(1)) {
    const stitched = stitchRanges([
      scanRangeSync(file, 0, cut, 200),
      scanRangeSync(file, cut, bytes.length, 200),
    ]);
    expect(stitched, `cut at ${cut}`).toEqual(whole);
  }
  const ranges = [...starts, bytes.length]
    .slice(1)
    .map((to, i) => scanRangeSync(file, starts[i] as number, to));
  expect(stitchRanges(ranges)).toEqual(whole);
  return whole;
}

describe("audit verification", () => {
  const lines = chain(12);

  it("accepts an intact chain across read-chunk boundaries and reports its head", async () => {
    const head = (JSON.parse(lines.at(-1) as string) as { hash: string }).hash;
    expect(verify(lines.join(""))).toEqual({ rows: 12, valid: true, headHash: head });
    expect(await verifyAuditFile(write(lines.join("")), { chunkBytes: 100 })).toEqual({
      rows: 12,
      valid: true,
      headHash: head,
    });
  });

  it("treats a missing or empty log as an empty valid chain", () => {
    expect(scanAuditFileSync("/nonexistent/authzd/audit.jsonl").report).toEqual({
      rows: 0,
      valid: true,
      headHash: GENESIS_HASH,
    });
    expect(verify("")).toEqual({ rows: 0, valid: true, headHash: GENESIS_HASH });
  });

  it("locates a flipped bit at every byte position of a row", () => {
    const target = 6;
    const line = Buffer.from(lines[target] as string);
    for (let i = 0; i < line.length - 1; i++) {
      const bytes = Buffer.from(line);
      bytes[i] = (bytes[i] as number) ^ 0x01;
      const text = Buffer.concat([
        Buffer.from(lines.slice(0, target).join("")),
        bytes,
        Buffer.from(lines.slice(target + 1).join("")),
      ]);
      const report = verify(text);
      expect(report.valid, `byte ${i}`).toBe(false);
      expect(report.firstBadIndex, `byte ${i}`).toBe(target);
    }
  });

  it("locates every single-row deletion, adjacent swap and duplicate insertion", () => {
    for (let k = 0; k < lines.length; k++) {
      const deleted = lines.filter((_, i) => i !== k);
      const report = verify(deleted.join(""));
      if (k === lines.length - 1) {
        // Dropping the last row leaves a valid shorter chain; only the daemon's row count can tell.
        expect(report).toMatchObject({ valid: true, rows: lines.length - 1 });
      } else {
        expect(report.firstBadIndex, `delete ${k}`).toBe(k);
      }
      if (k + 1 < lines.length) {
        const swapped = [...lines];
        [swapped[k], swapped[k + 1]] = [lines[k + 1] as string, lines[k] as string];
        expect(verify(swapped.join("")).firstBadIndex, `swap ${k}`).toBe(k);
      }
      const inserted = [...lines];
      inserted.splice(k, 0, lines[(k + 3) % lines.length] as string);
      expect(verify(inserted.join("")).firstBadIndex, `insert ${k}`).toBe(k);
    }
  });

  it("rejects a re-hashed row that is not canonically encoded", () => {
    const { row } = JSON.parse(lines[2] as string) as { row: Record<string, JsonValue> };
    const body = `{ ${canonicalJson(row).slice(1)}`; // same row, one space more
    const forged = [...lines];
    forged[2] = `{"hash":"${createHash("sha256").update(body).digest("hex")}","row":${body}}\n`;
    expect(verify(forged.join(""))).toMatchObject({
      firstBadIndex: 2,
      problem: "row is not canonically encoded",
    });
  });

  it("reports a torn last line and the byte length of the good prefix", () => {
    const whole = lines.join("");
    const torn = whole.slice(0, whole.length - 10);
    const result = scanAuditFileSync(write(torn));
    expect(result.report).toMatchObject({ rows: 12, valid: false, firstBadIndex: 11 });
    expect(result.tornTailOnly).toBe(true);
    expect(result.goodRows).toBe(11);
    expect(result.goodBytes).toBe(lines.slice(0, 11).join("").length);
    const midCut = scanAuditFileSync(write(whole.slice(0, lines.slice(0, 3).join("").length + 5)));
    expect(midCut.report).toMatchObject({ rows: 4, firstBadIndex: 3 });
  });

  it("passes each verified row and its hash to onRow, in order", () => {
    const seen: number[] = [];
    scanAuditFileSync(write(lines.join("")), { onRow: (row) => seen.push(row.seq) });
    expect(seen).toEqual([...Array(12).keys()]);
  });

  it("reads no further than limitBytes", () => {
    const whole = lines.join("");
    const limit = lines.slice(0, 5).join("").length;
    expect(scanAuditFileSync(write(`${whole}garbage`), { limitBytes: limit }).report).toMatchObject({
      rows: 5,
      valid: true,
    });
  });
});
