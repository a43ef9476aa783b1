import fs from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { encodeRow, GENESIS_HASH } from "../src/audit/rows.ts";
import { runCli, SPEND, TestDaemon, tempHome } from "./harness.ts";

interface Report {
  rows: number;
  valid: boolean;
  headHash: string;
  firstBadIndex?: number;
  problem?: string;
}

/** Lines of a log, each with its newline. */
function linesOf(text: string): string[] {
  return text.split(/(?<=\n)/);
}

describe("audit chain tamper detection", () => {
  let daemon: TestDaemon;
  let pristine: string;
  let pristineRows: number;

  beforeAll(async () => {
    daemon = await TestDaemon.start({ SPEND_AUTHZ_ENABLED: "1" });
    const token = await daemon.identity("agent", ["wallet.spend.authorize"]);
    for (let i = 0; i < 8; i++) {
      await daemon.call("POST", "/spend/authorize", { token, body: { ...SPEND, amount: String(100 + i) } });
    }
    pristine = fs.readFileSync(path.join(daemon.home, "audit.jsonl"), "utf8");
    pristineRows = linesOf(pristine).length; // identity, grant, 8 decisions
  });

  afterAll(async () => {
    await daemon.stop();
  });

  /**
   * Writes `text` as a log in a fresh home and runs `authzd audit verify` on it, once on one thread
   * and once split across three worker threads; both must give the same report.
   */
  async function verifyText(text: string): Promise<{ code: number | null; report: Report }> {
    const home = tempHome();
    fs.writeFileSync(path.join(home, "audit.jsonl"), text);
    const [single, parallel] = await Promise.all([
      runCli(["audit", "verify", "--threads", "1"], home),
      runCli(["audit", "verify", "--threads", "3"], home),
    ]);
    expect(parallel.stdout).toBe(single.stdout);
    expect(parallel.code).toBe(single.code);
    return { code: single.code, report: JSON.parse(single.stdout) as Report };
  }

  it("reports an untouched log as valid with its head hash", async () => {
    const { code, report } = await verifyText(pristine);
    expect(code).toBe(0);
    const lastHash = (JSON.parse(linesOf(pristine).at(-1) as string) as { hash: string }).hash;
    expect(report).toEqual({ rows: pristineRows, valid: true, headHash: lastHash });
  });

  it("locates a flipped byte at the row that holds it", async () => {
    const lines = linesOf(pristine);
    const target = lines[5] as string;
    const at = target.indexOf('"amount":"10') + '"amount":"10'.length;
    lines[5] = `${target.slice(0, at)}${target[at] === "9" ? "8" : "9"}${target.slice(at + 1)}`;
    const { code, report } = await verifyText(lines.join(""));
    expect(code).toBe(1);
    expect(report).toMatchObject({
      rows: pristineRows,
      valid: false,
      firstBadIndex: 5,
      problem: "row hash does not match its contents",
    });
  });

  it("locates a flipped byte in a stored hash", async () => {
    const lines = linesOf(pristine);
    const target = lines[3] as string;
    lines[3] = `${target.slice(0, 20)}${target[20] === "0" ? "1" : "0"}${target.slice(21)}`;
    expect((await verifyText(lines.join(""))).report).toMatchObject({ valid: false, firstBadIndex: 3 });
  });

  it("locates a deleted row at the index it used to occupy", async () => {
    const lines = linesOf(pristine);
    lines.splice(4, 1);
    const { report } = await verifyText(lines.join(""));
    expect(report).toMatchObject({ rows: pristineRows - 1, valid: false, firstBadIndex: 4 });
  });

  it("locates two swapped rows at the first of them", async () => {
    const lines = linesOf(pristine);
    [lines[3], lines[6]] = [lines[6] as string, lines[3] as string];
    const { report } = await verifyText(lines.join(""));
    expect(report).toMatchObject({ valid: false, firstBadIndex: 3 });
  });

  it("locates an inserted row at its position", async () => {
    const lines = linesOf(pristine);
    lines.splice(2, 0, lines[7] as string);
    const { report } = await verifyText(lines.join(""));
    expect(report).toMatchObject({ rows: pristineRows + 1, valid: false, firstBadIndex: 2 });
  });

  it("reports a log truncated mid-line as a torn last row", async () => {
    const cut = pristine.length - 30;
    const { code, report } = await verifyText(pristine.slice(0, cut));
    expect(code).toBe(1);
    expect(report).toMatchObject({
      rows: pristineRows,
      valid: false,
      firstBadIndex: pristineRows - 1,
      problem: `torn last line: ${cut - pristine.lastIndexOf("\n", cut) - 1} bytes without a newline`,
    });
  });

  it("reports a log truncated in the middle at the row that was cut", async () => {
    const lines = linesOf(pristine);
    const cut = lines.slice(0, 4).join("").length + 25;
    const { report } = await verifyText(pristine.slice(0, cut));
    expect(report).toMatchObject({ rows: 5, valid: false, firstBadIndex: 4 });
  });

  it("GET /audit/verify reports tampering with the running daemon's own log", async () => {
    const token = daemon.operatorToken;
    const log = path.join(daemon.home, "audit.jsonl");
    expect((await daemon.call<Report>("GET", "/audit/verify", { token })).body.valid).toBe(true);
    try {
      const lines = linesOf(pristine);
      [lines[6], lines[7]] = [lines[7] as string, lines[6] as string];
      fs.writeFileSync(log, lines.join(""));
      expect((await daemon.call<Report>("GET", "/audit/verify", { token })).body).toMatchObject({
        valid: false,
        firstBadIndex: 6,
      });
      // Rows cut off at a row boundary leave a chain that is valid on its own; the daemon knows better.
      fs.writeFileSync(log, linesOf(pristine).slice(0, 7).join(""));
      expect((await daemon.call<Report>("GET", "/audit/verify", { token })).body).toMatchObject({
        rows: 7,
        valid: false,
        firstBadIndex: 7,
      });
    } finally {
      fs.writeFileSync(log, pristine);
    }
    expect((await daemon.call<Report>("GET", "/audit/verify", { token })).body.valid).toBe(true);
  });
});

describe("audit verification of a large log by the running daemon", () => {
  it("verifies a log of over 32 MiB on worker threads and locates a flipped byte deep inside it", async () => {
    const home = tempHome();
    const file = path.join(home, "audit.jsonl");
    const rows = 70_000; // about 37 MiB: above the threshold for worker threads
    const fd = fs.openSync(file, "w");
    let prev = GENESIS_HASH;
    let batch: string[] = [];
    const offsets: number[] = [];
    let offset = 0;
    for (let seq = 0; seq < rows; seq++) {
      const { line, hash } = encodeRow({
        kind: "spend_authorization_decided",
        ...SPEND,
        approved: false,
        reason: "amount 9000 exceeds per_call_cap 5000",
        decision_id: `dec_${seq.toString(16).padStart(32, "0")}`,
        payer: "agent",
        seq,
        prev,
        time: new Date(Date.now() - rows + seq).toISOString(),
      });
      offsets.push(offset);
      offset += Buffer.byteLength(line);
      prev = hash;
      batch.push(line);
      if (batch.length === 10_000) {
        fs.writeSync(fd, batch.join(""));
        batch = [];
      }
    }
    fs.writeSync(fd, batch.join(""));
    fs.closeSync(fd);
    expect(offset).toBeGreaterThan(32 << 20);

    const daemon = await TestDaemon.start({ SPEND_AUTHZ_ENABLED: "1" }, home);
    try {
      const token = daemon.operatorToken;
      expect((await daemon.call<Report>("GET", "/audit/verify", { token })).body).toEqual({
        rows,
        valid: true,
        headHash: prev,
      });
      const target = 61_234;
      const at = (offsets[target] as number) + 100;
      const handle = fs.openSync(file, "r+");
      const byte = Buffer.alloc(1);
      fs.readSync(handle, byte, 0, 1, at);
      fs.writeSync(handle, Buffer.from([(byte[0] as number) ^ 0x01]), 0, 1, at);
      fs.closeSync(handle);
      expect((await daemon.call<Report>("GET", "/audit/verify", { token })).body).toMatchObject({
        rows,
        valid: false,
        firstBadIndex: target,
      });
    } finally {
      await daemon.stop();
    }
  });
});
