// Sums the vitest JSON reports that the workspaces wrote under the given directory into one closing line.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

const dir = process.argv[2];
let passed = 0;
let failed = 0;
let skipped = 0;
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
    }
  }
};
walk(dir);
console.log(`${passed} passed, ${failed} failed, ${skipped} skipped`);
