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
      // So is a rewritten, re-hashed last row (same length); it no longer hashes to the durable head.
      const rewritten = linesOf(pristine);
      const last = (JSON.parse(rewritten.at(-1) as string) as { row: Parameters<typeof encodeRow>[0] }).row;
      expect(last).toMatchObject({ amount: "107" });
      rewritten[pristineRows - 1] = encodeRow({ ...last, amount: "999" } as typeof last).line;
      fs.writeFileSync(log, rewritten.join(""));
      expect((await daemon.call<Report>("GET", "/audit/verify", { token })).body).toMatchObject({
        rows: pristineRows,
        valid: false,
        firstBadIndex: pristineRows - 1,
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

describe("head anchor: rows cut off the end of a stopped daemon's log", () => {
  let home: string;
  let pristine: string;
  let rows: number;

  beforeAll(async () => {
    const daemon = await TestDaemon.start({ SPEND_AUTHZ_ENABLED: "1" });
    const token = await daemon.identity("agent", ["wallet.spend.authorize", "wallet.spend.settle"], {
      budgetCredits: 20,
    });
    for (let i = 0; i < 4; i++) {
      const verdict = await daemon.call<{ decision_id: string }>("POST", "/spend/authorize", {
        token,
        body: { ...SPEND, credits: 2 },
      });
      await daemon.call("POST", "/spend/settle", {
        token,
        body: {
          decision_id: verdict.body.decision_id,
          provider: SPEND.provider,
          network: SPEND.network,
          asset: SPEND.asset,
          amount: SPEND.amount,
          credits: 2,
        },
      });
    }
    await daemon.stop();
    home = daemon.home;
    pristine = fs.readFileSync(path.join(home, "audit.jsonl"), "utf8");
    rows = linesOf(pristine).length; // identity, 2 grants, 4 x (decision, settlement)
  });

  /** A copy of the stopped daemon's home whose log is `text` (the head anchor is copied as it is). */
  function homeWithLog(text: string): string {
    const copy = tempHome();
    fs.cpSync(home, copy, { recursive: true });
    fs.writeFileSync(path.join(copy, "audit.jsonl"), text);
    return copy;
  }

  const withoutLast = (n: number) =>
    linesOf(pristine)
      .slice(0, rows - n)
      .join("");

  it("records the durable head beside the log", () => {
    const lastHash = (JSON.parse(linesOf(pristine).at(-1) as string) as { hash: string }).hash;
    const anchor = JSON.parse(fs.readFileSync(path.join(home, "audit.head"), "utf8")) as unknown;
    expect(anchor).toEqual({ rows, headHash: lastHash, stopped: true });
  });

  it("refuses rows chained on after a clean stop (a forged identity with a budget): audit verify and start-up name the first", async () => {
    const lines = linesOf(pristine);
    const last = JSON.parse(lines.at(-1) as string) as { hash: string; row: { seq: number } };
    const forged = encodeRow({
      kind: "identity_created",
      identity: "evil",
      token_sha256: "0".repeat(64),
      budget_credits: 1_000_000,
      seq: last.row.seq + 1,
      prev: last.hash,
      time: new Date().toISOString(),
    } as unknown as Parameters<typeof encodeRow>[0]).line;
    const copy = homeWithLog(pristine + forged);
    const verify = await runCli(["audit", "verify"], copy);
    expect(verify.code).toBe(1);
    expect(JSON.parse(verify.stdout)).toMatchObject({
      valid: false,
      firstBadIndex: rows,
      problem: expect.stringMatching(
        /1 rows follow the head anchor written when authzd last stopped cleanly/,
      ),
    });
    await expect(TestDaemon.start({ SPEND_AUTHZ_ENABLED: "1" }, copy)).rejects.toThrow(
      new RegExp(`audit chain invalid at row ${rows}: .*stopped cleanly.*; refusing to start`),
    );
  });

  it("audit verify reports the first missing row when the last row or the last 3 rows are deleted", async () => {
    const [one, three] = await Promise.all([
      runCli(["audit", "verify"], homeWithLog(withoutLast(1))),
      runCli(["audit", "verify"], homeWithLog(withoutLast(3))),
    ]);
    expect(one.code).toBe(1);
    expect(JSON.parse(one.stdout)).toMatchObject({ rows: rows - 1, valid: false, firstBadIndex: rows - 1 });
    expect(three.code).toBe(1);
    expect(JSON.parse(three.stdout)).toMatchObject({ rows: rows - 3, valid: false, firstBadIndex: rows - 3 });
  });

  it("audit verify warns, as with no anchor, when a head anchor of no rows stands over a log with rows", async () => {
    // Cutting rows off the end and writing a fresh anchor of none hid the cut: verify said valid, and nothing more.
    const copy = homeWithLog(withoutLast(3));
    fs.writeFileSync(path.join(copy, "audit.head"), JSON.stringify({ rows: 0, headHash: "0".repeat(64) }));
    const verify = await runCli(["audit", "verify"], copy);
    expect(verify.code).toBe(0);
    expect(JSON.parse(verify.stdout)).toMatchObject({ rows: rows - 3, valid: true });
    expect(verify.stderr).toMatch(
      /^authzd: the head anchor at \S+audit\.head vouches for none of the log's rows; rows cut off the end of the log cannot be detected/,
    );
  });

  it("audit verify reports a re-hashed last row (a chain valid on its own) at that row", async () => {
    const lines = linesOf(pristine);
    const last = (JSON.parse(lines.at(-1) as string) as { row: Parameters<typeof encodeRow>[0] }).row;
    lines[rows - 1] = encodeRow({ ...last, credits: 1 } as Parameters<typeof encodeRow>[0]).line;
    const run = await runCli(["audit", "verify", "--threads", "2"], homeWithLog(lines.join("")));
    expect(run.code).toBe(1);
    expect(JSON.parse(run.stdout)).toMatchObject({ rows, valid: false, firstBadIndex: rows - 1 });
  });

  it("refuses to start on a log whose last row or last 3 rows were deleted, naming the index", async () => {
    const [one, three] = await Promise.allSettled([
      TestDaemon.start({ SPEND_AUTHZ_ENABLED: "1" }, homeWithLog(withoutLast(1))),
      TestDaemon.start({ SPEND_AUTHZ_ENABLED: "1" }, homeWithLog(withoutLast(3))),
    ]);
    for (const started of [one, three]) if (started.status === "fulfilled") await started.value.stop();
    expect(one.status).toBe("rejected");
    expect(String((one as PromiseRejectedResult).reason)).toMatch(
      new RegExp(`audit chain invalid at row ${rows - 1}: .*head anchor.*; refusing to start`),
    );
    expect(three.status).toBe("rejected");
    expect(String((three as PromiseRejectedResult).reason)).toMatch(
      new RegExp(`audit chain invalid at row ${rows - 3}: .*head anchor.*; refusing to start`),
    );
  });

  it("refuses to treat an anchored row cut mid-line as a torn tail", async () => {
    const copy = homeWithLog(pristine.slice(0, pristine.length - 30));
    await expect(TestDaemon.start({ SPEND_AUTHZ_ENABLED: "1" }, copy)).rejects.toThrow(
      new RegExp(`audit chain invalid at row ${rows - 1}: torn last line.*head anchor`),
    );
  });

  it("restarts on the untouched log, and still repairs a torn line written after the anchored rows", async () => {
    const lastLine = linesOf(pristine).at(-1) as string;
    const copy = homeWithLog(pristine + lastLine.slice(0, 50));
    const daemon = await TestDaemon.start({ SPEND_AUTHZ_ENABLED: "1" }, copy);
    try {
      expect(daemon.output()).toContain("torn line (50 bytes");
      const verify = await daemon.call<Report>("GET", "/audit/verify", { token: daemon.operatorToken });
      expect(verify.body).toMatchObject({ rows: rows + 1, valid: true });
      const budget = await daemon.call("GET", "/budgets/agent", { token: daemon.operatorToken });
      expect(budget.body).toMatchObject({ settled_credits: 8, reserved_credits: 0 });
    } finally {
      await daemon.stop();
    }
    const anchor = JSON.parse(fs.readFileSync(path.join(copy, "audit.head"), "utf8")) as Report;
    expect(anchor.rows).toBe(rows + 1);
    const verify = await runCli(["audit", "verify"], copy);
    expect(verify.code).toBe(0);
    expect(JSON.parse(verify.stdout)).toMatchObject({
      rows: rows + 1,
      valid: true,
      headHash: anchor.headHash,
    });
  });
});
