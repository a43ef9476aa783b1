/**
 * One daemon per home: two appending to one audit log would fork its chain and each spend the whole
 * budget. Processes that start at once over a pid file left by a killed daemon take the home one at a time.
 */
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it, onTestFinished } from "vitest";
import { homePaths } from "../src/internal/home.ts";

const HOME_MODULE = path.resolve(import.meta.dirname, "../src/internal/home.ts");
/**
 * A process that says it is ready (its imports done), waits (blocked on its stdin) for the start signal, tries
 * to take the home, says how it went, and lives on (holding what it took) until killed: a contender that
 * starts late must still find the winner alive.
 */
const CONTENDER = `
import { readSync } from "node:fs";
import { acquireHomeLock, homePaths } from ${JSON.stringify(HOME_MODULE)};
const home = process.argv.at(-1);
console.log("ready");
readSync(0, Buffer.alloc(1));
try { acquireHomeLock(homePaths(home)); console.log("took it"); } catch (error) { console.log(error.message); }
setInterval(() => {}, 1_000);
`;

/**
 * Starts a contender: `ready` resolves once it waits for the start signal, which `go` gives; `outcome` is
 * the line it prints after that (or all it said, if it died first).
 */
function contender(home: string) {
  const child = spawn(
    process.execPath,
    ["--import", "tsx", "--input-type=module", "-e", CONTENDER, "--", home],
    { stdio: ["pipe", "pipe", "pipe"] },
  );
  onTestFinished(() => {
    child.kill("SIGKILL");
  });
  // What it printed on stdout says how it went; stderr only tells why it died, if it did.
  let printed = "";
  let complaints = "";
  child.stderr.on("data", (chunk: Buffer) => {
    complaints += chunk.toString();
  });
  const ready = new Promise<void>((resolve, reject) => {
    child.stdout.on("data", (chunk: Buffer) => {
      printed += chunk.toString();
      if (printed.startsWith("ready\n")) resolve();
    });
    child.on("exit", () =>
      reject(new Error(`a contender died before it was ready: ${printed}${complaints}`)),
    );
  });
  const outcome = new Promise<string>((resolve) => {
    const said = () => printed.slice("ready\n".length);
    child.stdout.on("data", () => {
      if (said().includes("\n")) resolve(said().split("\n")[0] ?? "");
    });
    child.on("exit", () => resolve(`${said()}${complaints}`.trim()));
  });
  return { ready, go: () => child.stdin.write("g"), outcome };
}

describe("the home lock", () => {
  it("is taken by exactly one of four processes racing over a killed daemon's pid file; the others are told who has it", async () => {
    for (let round = 0; round < 5; round++) {
      const home = fs.mkdtempSync(path.join(os.tmpdir(), "authzd-lock-"));
      onTestFinished(() => fs.rmSync(home, { recursive: true, force: true }));
      // A pid no process has: the daemon that wrote it was killed.
      fs.writeFileSync(homePaths(home).pidFile, "999999\n");
      // All four start at once: the signal is given only when every one of them is waiting for it.
      const contenders = Array.from({ length: 4 }, () => contender(home));
      await Promise.all(contenders.map((c) => c.ready));
      for (const c of contenders) c.go();
      const outcomes = await Promise.all(contenders.map((c) => c.outcome));
      expect(
        outcomes.filter((outcome) => outcome === "took it"),
        outcomes.join(" | "),
      ).toHaveLength(1);
      for (const outcome of outcomes.filter((o) => o !== "took it"))
        expect(outcome).toMatch(/^another authzd \(pid \d+\) is using /);
    }
  }, 120_000);
});
