/**
 * `svc`: runs one command and exits with its code (README "Exit codes"). Every failure is one line on
 * stderr (JSON with --json); a stack trace only with --verbose, and only for a fault of the CLI itself.
 */
import { CommanderError } from "commander";
import { describeFailure, EXIT, exitCodeOf } from "./failure.ts";
import { buildProgram } from "./program.ts";

const argv = process.argv;
const json = argv.includes("--json");
const verbose = argv.includes("--verbose") || argv.includes("-v");

try {
  await buildProgram(process.env, json).parseAsync(argv);
} catch (error) {
  if (error instanceof CommanderError) {
    // Commander printed its own one-line message (or the help / version, exit code 0).
    process.exitCode = error.exitCode === 0 ? EXIT.ok : EXIT.usage;
  } else {
    process.stderr.write(`${describeFailure(error, { json, verbose })}\n`);
    process.exitCode = exitCodeOf(error);
  }
}
