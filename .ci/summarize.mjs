// Sums the vitest JSON reports that the workspaces wrote under the given directory into one closing line,
// after the wall time of each package's run and the slowest test files (where a slow CI run spent its time).
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";

const dir = process.argv[2];
let passed = 0;
let failed = 0;
let skipped = 0;
const runs = [];
const files = [];
const walk = (path) => {
  for (const entry of readdirSync(path, { withFileTypes: true })) {
    const full = join(path, entry.name);
    if (entry.isDirectory()) walk(full);
    else if (entry.name.endsWith(".json")) {
      const report = JSON.parse(readFileSync(full, "utf8"));
      passed += report.numPassedTests;
      // A suite that failed without a failing test (a file that did not load) still counts as a failure.
      failed += report.numFailedTests || (report.numFailedTestSuites ?? 0);
      skipped += report.numPendingTests + report.numTodoTests;
      const run = relative(dir, full).replace(/\.json$/, "");
      const ends = report.testResults.map((file) => file.endTime ?? 0);
      runs.push({ run, seconds: (Math.max(report.startTime, ...ends) - report.startTime) / 1000 });
      for (const file of report.testResults) {
        if (file.startTime && file.endTime) {
          files.push({
            run,
            name: relative(process.cwd(), file.name),
            seconds: (file.endTime - file.startTime) / 1000,
          });
        }
      }
    }
  }
};
walk(dir);
console.log("wall time per run:");
for (const { run, seconds } of runs.sort((a, b) => a.run.localeCompare(b.run))) {
  console.log(`  ${run.padEnd(22)} ${seconds.toFixed(0).padStart(5)} s`);
}
console.log("slowest test files:");
for (const { run, name, seconds } of files.sort((a, b) => b.seconds - a.seconds).slice(0, 15)) {
  console.log(`  ${seconds.toFixed(0).padStart(5)} s  ${run}: ${name}`);
}
console.log(`${passed} passed, ${failed} failed, ${skipped} skipped`);
