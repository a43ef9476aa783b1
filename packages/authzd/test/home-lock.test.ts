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
 * A process that waits until `at`, tries to take the home, says how it went, and lives on (holding what it
 * took) until killed: a contender that starts late must still find the winner alive.
 */
const CONTENDER = `
import { acquireHomeLock, homePaths } from ${JSON.stringify(HOME_MODULE)};
const [home, at] = process.argv.slice(-2);
while (Date.now() < Number(at)) {}
try { acquireHomeLock(homePaths(home)); console.log("took it"); } catch (error) { console.log(error.message); }
setInterval(() => {}, 1_000);
`;

/** Starts a contender; its outcome is the first line it prints (or all it said, if it died first). */
function contender(home: string, at: number) {
  const child = spawn(
    process.execPath,
    ["--import", "tsx", "--input-type=module", "-e", CONTENDER, "--", home, String(at)],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  onTestFinished(() => {
    child.kill("SIGKILL");
  });
  const outcome = new Promise<string>((resolve) => {
    // What it printed on stdout says how it went; stderr only tells why it died, if it did.
    let printed = "";
    let complaints = "";
    child.stdout.on("data", (chunk: Buffer) => {
      printed += chunk.toString();
      if (printed.includes("\n")) resolve(printed.split("\n")[0] ?? "");
    });
    child.stderr.on("data", (chunk: Buffer) => {
      complaints += chunk.toString();
    });
    child.on("exit", () => resolve(`${printed}${complaints}`.trim()));
  });
  return outcome;
}

describe("the home lock", () => {
  it("is taken by exactly one of four processes racing over a killed daemon's pid file; the others are told who has it", async () => {
    for (let round = 0; round < 5; round++) {
      const home = fs.mkdtempSync(path.join(os.tmpdir(), "authzd-lock-"));
      onTestFinished(() => fs.rmSync(home, { recursive: true, force: true }));
      // A pid no process has: the daemon that wrote it was killed.
      fs.writeFileSync(homePaths(home).pidFile, "999999\n");
      const at = Date.now() + 1_500;
      const outcomes = await Promise.all(Array.from({ length: 4 }, () => contender(home, at)));
      expect(
        outcomes.filter((outcome) => outcome === "took it"),
        outcomes.join(" | "),
      ).toHaveLength(1);
      for (const outcome of outcomes.filter((o) => o !== "took it"))
        expect(outcome).toMatch(/^another authzd \(pid \d+\) is using /);
    }
  }, 120_000);
});
