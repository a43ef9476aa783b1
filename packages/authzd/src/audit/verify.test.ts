import { createHash } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import type { HeadAnchor } from "./anchor.ts";
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
function verify(text: string | Buffer, anchor?: HeadAnchor) {
  const file = write(text);
  const opts = anchor === undefined ? {} : { anchor };
  const watch = anchor === undefined ? -1 : anchor.rows - 1;
  const whole = scanAuditFileSync(file, { chunkBytes: 333, ...opts }).report;
  const bytes = Buffer.from(text);
  const starts = [0];
  for (let i = bytes.indexOf(0x0a); i !== -1 && i + 1 < bytes.length; i = bytes.indexOf(0x0a, i + 1))
    starts.push(i + 1);
  for (const cut of starts.slice(1)) {
    const stitched = stitchRanges(
      [scanRangeSync(file, 0, cut, 200, watch), scanRangeSync(file, cut, bytes.length, 200, watch)],
      anchor,
    );
    expect(stitched, `cut at ${cut}`).toEqual(whole);
  }
  const ranges = [...starts, bytes.length]
    .slice(1)
    .map((to, i) => scanRangeSync(file, starts[i] as number, to, undefined, watch));
  expect(stitchRanges(ranges, anchor)).toEqual(whole);
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
        // Dropping the last row leaves a valid shorter chain; only the head anchor can tell (see below).
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

  describe("against a head anchor", () => {
    const hashOf = (line: string) => (JSON.parse(line) as { hash: string }).hash;
    const anchor: HeadAnchor = { rows: 12, headHash: hashOf(lines[11] as string) };

    it("accepts the anchored log, and a log that grew past a lagging anchor", () => {
      expect(verify(lines.join(""), anchor)).toMatchObject({ rows: 12, valid: true });
      const lagging = { rows: 7, headHash: hashOf(lines[6] as string) };
      expect(verify(lines.join(""), lagging)).toMatchObject({ rows: 12, valid: true });
      expect(verify(lines.join(""), { rows: 0, headHash: GENESIS_HASH })).toMatchObject({ valid: true });
    });

    it("locates rows cut off the end at the first missing row, for every cut", () => {
      for (let cut = 1; cut <= 12; cut++) {
        const report = verify(lines.slice(0, 12 - cut).join(""), anchor);
        expect(report, `cut ${cut}`).toMatchObject({
          rows: 12 - cut,
          valid: false,
          firstBadIndex: 12 - cut,
          problem: `the log ends after ${12 - cut} rows but the head anchor records 12`,
        });
      }
      expect(scanAuditFileSync("/nonexistent/authzd/audit.jsonl", { anchor }).report).toMatchObject({
        valid: false,
        firstBadIndex: 0,
      });
    });

    it("locates a rewritten tail that is a valid chain on its own at the anchored last row", () => {
      // The last row changed and re-hashed: it still links to row 10, so the chain is valid on its own.
      const last = (JSON.parse(lines[11] as string) as { row: AuditRow }).row;
      const rewritten = [
        ...lines.slice(0, 11),
        encodeRow({ ...last, identity: "someone-else" } as AuditRow).line,
      ];
      expect(verify(rewritten.join(""))).toMatchObject({ valid: true });
      expect(verify(rewritten.join(""), anchor)).toMatchObject({
        rows: 12,
        valid: false,
        firstBadIndex: 11,
        problem: "row 11 does not hash to the head anchor's headHash",
      });
      // Rows appended after a forged anchored row do not hide it.
      const longer = { rows: 11, headHash: anchor.headHash };
      expect(verify(lines.join(""), longer)).toMatchObject({ valid: false, firstBadIndex: 10 });
    });

    it("keeps an earlier fault of the file itself as the first bad index", () => {
      const deleted = lines.filter((_, i) => i !== 3);
      expect(verify(deleted.join(""), anchor)).toMatchObject({ valid: false, firstBadIndex: 3 });
    });

    it("repairs a torn line only after the anchored rows", () => {
      const whole = lines.join("");
      const tornAfter = `${whole}${(lines[5] as string).slice(0, 40)}`;
      const after = scanAuditFileSync(write(tornAfter), { anchor });
      expect(after.report).toMatchObject({ valid: false, firstBadIndex: 12 });
      expect(after.tornTailOnly).toBe(true);
      const tornInside = scanAuditFileSync(write(whole.slice(0, whole.length - 10)), { anchor });
      expect(tornInside.report).toMatchObject({
        valid: false,
        firstBadIndex: 11,
        problem: `torn last line: ${(lines[11] as string).length - 10} bytes without a newline, but the head anchor records 12 rows as durable`,
      });
      expect(tornInside.tornTailOnly).toBe(false);
    });
  });
});
