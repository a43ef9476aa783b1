/**
 * `authzd serve` on a clock the test harness moves (testing.ts, `StartOptions.clockOffsetMs`): the system
 * clock plus an offset, given as the first argument and moved forward by each `advance <ms>` line on
 * stdin, which is answered on stdout once the daemon reads the new time. Everything else is `authzd serve`.
 */
import readline from "node:readline";
import { serve } from "./cli/serve.ts";
import { clockMovedLine } from "./testing.ts";

let offsetMs = Number(process.argv[2] ?? "0");
readline.createInterface({ input: process.stdin }).on("line", (line) => {
  const step = /^advance (\d+)$/.exec(line)?.[1];
  if (step === undefined) return;
  offsetMs += Number(step);
  process.stdout.write(`${clockMovedLine(offsetMs)}\n`);
});

try {
  await serve({ now: () => Date.now() + offsetMs });
} catch (error) {
  // As `authzd serve` says it; stdin, read above, would keep the process alive.
  process.stderr.write(`authzd: ${(error as Error).message}\n`);
  process.exit(2);
}
