/**
 * Benchmark: authorize decisions/s and latency at 1 and 32 concurrent clients against a real daemon
 * process (durable audit writes: every verdict waits for its fdatasync), then `audit verify` over a
 * 1,000,000-row log. Run with `npm run bench -w packages/authzd`.
 */
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { anchorFileFor, writeAnchorSync } from "../src/audit/anchor.ts";
import { type AuditRow, encodeRow, GENESIS_HASH } from "../src/audit/rows.ts";
import { scanAuditFileSync } from "../src/audit/verify.ts";
import { PACKAGE_DIR, startTestDaemon } from "../src/testing.ts";
import { SPEND } from "../test/harness.ts";
import { buildPost, RawClient } from "./client.ts";

const DURATION_MS = Number(process.env.BENCH_SECONDS ?? 5) * 1000;
const WARMUP_MS = 1000;
const VERIFY_ROWS = 1_000_000;

interface LoadResult {
  concurrency: number;
  decisions: number;
  seconds: number;
  p50: number;
  p99: number;
  max: number;
  errors: number;
}

function percentile(sorted: Float64Array, p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? Number.NaN;
}

/** `concurrency` clients, each sending one authorize at a time on its own keep-alive connection. */
async function load(url: URL, token: string, concurrency: number, durationMs: number): Promise<LoadResult> {
  const port = Number(url.port);
  const request = buildPost(url.hostname, port, "/spend/authorize", token, SPEND);
  const clients = await Promise.all(
    Array.from({ length: concurrency }, () => RawClient.connect(url.hostname, port)),
  );
  let recording = false;
  let stop = false;
  const latencies: number[] = [];
  let errors = 0;
  const worker = async (client: RawClient): Promise<void> => {
    while (!stop) {
      const start = process.hrtime.bigint();
      const status = await client.send(request);
      const ms = Number(process.hrtime.bigint() - start) / 1e6;
      if (!recording) continue;
      if (status === 200) latencies.push(ms);
      else errors++;
    }
  };
  const workers = clients.map(worker);
  await new Promise((resolve) => setTimeout(resolve, WARMUP_MS));
  recording = true;
  const started = performance.now();
  await new Promise((resolve) => setTimeout(resolve, durationMs));
  recording = false;
  const seconds = (performance.now() - started) / 1000;
  stop = true;
  await Promise.all(workers);
  for (const client of clients) client.close();
  const sorted = Float64Array.from(latencies).sort();
  return {
    concurrency,
    decisions: latencies.length,
    seconds,
    p50: percentile(sorted, 0.5),
    p99: percentile(sorted, 0.99),
    max: sorted[sorted.length - 1] ?? Number.NaN,
    errors,
  };
}

/** Writes a log of `rows` realistic decision rows, chained as the daemon would. */
function writeLog(file: string, rows: number): void {
  const fd = fs.openSync(file, "w");
  let prev = GENESIS_HASH;
  let pending: string[] = [];
  const start = Date.parse("2026-01-01T00:00:00Z");
  for (let seq = 0; seq < rows; seq++) {
    const row: AuditRow = {
      kind: "spend_authorization_decided",
      ...SPEND,
      credits: 1,
      approved: seq % 10 !== 0,
      reason: seq % 10 !== 0 ? null : "amount 9000 exceeds per_call_cap 5000",
      decision_id: `dec_${seq.toString(16).padStart(32, "0")}`,
      payer: `agent-${seq % 7}`,
      seq,
      prev,
      time: new Date(start + seq).toISOString(),
    };
    const { line, hash } = encodeRow(row);
    prev = hash;
    pending.push(line);
    if (pending.length === 10_000) {
      fs.writeSync(fd, pending.join(""));
      pending = [];
    }
  }
  fs.writeSync(fd, pending.join(""));
  fs.closeSync(fd);
}

const fmt = (n: number, digits = 2): string => n.toFixed(digits);

/** Other work on the machine shares its cores; the load average says how much. */
const loadAverage = (): string =>
  os
    .loadavg()
    .map((n) => fmt(n))
    .join(" ");

async function main(): Promise<void> {
  console.log(
    `authzd benchmark — node ${process.version}, ${os.cpus().length} CPUs, ${DURATION_MS / 1000}s per run, load average ${loadAverage()}`,
  );
  // The rate limiter is off: this measures the daemon, not the limiter.
  const daemon = await startTestDaemon({ AUTHZD_SPEND_RATE_LIMIT_PER_SECOND: "0" });
  const results: LoadResult[] = [];
  try {
    const token = await daemon.identity("bench", ["wallet.spend.authorize"], {
      budgetCredits: Number.MAX_SAFE_INTEGER,
    });
    for (const concurrency of [1, 32]) {
      results.push(await load(new URL(daemon.url), token, concurrency, DURATION_MS));
    }
    const verify = await daemon.call<{ valid: boolean; rows: number }>("GET", "/audit/verify", {
      token: daemon.operatorToken,
    });
    console.log(`daemon log after the runs: ${verify.body.rows} rows, valid=${verify.body.valid}`);
  } finally {
    await daemon.stop();
    fs.rmSync(daemon.home, { recursive: true, force: true });
  }

  console.log("\nPOST /spend/authorize (approve path, fdatasync before every reply, group commit)");
  console.log("clients  decisions/s  p50 ms  p99 ms  max ms  errors");
  for (const r of results) {
    console.log(
      `${String(r.concurrency).padStart(7)}  ${fmt(r.decisions / r.seconds, 0).padStart(11)}  ${fmt(r.p50).padStart(6)}  ${fmt(r.p99).padStart(6)}  ${fmt(r.max).padStart(6)}  ${String(r.errors).padStart(6)}`,
    );
  }

  console.log(`\nload average ${loadAverage()}`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "authzd-bench-"));
  try {
    const file = path.join(dir, "audit.jsonl");
    const genStart = performance.now();
    writeLog(file, VERIFY_ROWS);
    const size = fs.statSync(file).size;
    console.log(
      `\naudit verify: generated ${VERIFY_ROWS} rows (${fmt(size / 2 ** 20, 0)} MiB) in ${fmt((performance.now() - genStart) / 1000)} s`,
    );
    const start = performance.now();
    const { report } = scanAuditFileSync(file);
    const seconds = (performance.now() - start) / 1000;
    if (!report.valid || report.rows !== VERIFY_ROWS)
      throw new Error(`unexpected report ${JSON.stringify(report)}`);
    console.log(`  in-process, one thread: ${fmt(seconds)} s (${fmt(VERIFY_ROWS / seconds / 1e6)} M rows/s)`);
    // The CLI also checks the log against its head anchor, as it would a daemon's.
    writeAnchorSync(anchorFileFor(file), { rows: report.rows, headHash: report.headHash });
    const cliStart = performance.now();
    const cli = spawnSync(
      process.execPath,
      ["--import", "tsx", "src/cli.ts", "audit", "verify", "--file", file],
      {
        cwd: PACKAGE_DIR,
        encoding: "utf8",
      },
    );
    const cliSeconds = (performance.now() - cliStart) / 1000;
    const cliReport = JSON.parse(cli.stdout) as { valid: boolean; rows: number };
    console.log(
      `  authzd audit verify (CLI, worker threads, incl. process start): ${fmt(cliSeconds)} s, valid=${cliReport.valid}, rows=${cliReport.rows}`,
    );
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

await main();
