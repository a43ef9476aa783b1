import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, type ExpectStatic, it } from "vitest";
import { eventually } from "./support/eventually.ts";
import {
  cleanEnvironment,
  matchesShown,
  normalise,
  parseTour,
  ShellSession,
  StartedService,
  type TourStep,
} from "./support/readme-tour.ts";
import { STORE_KIND } from "./support/test-server.ts";

const ROOT = fileURLToPath(new URL("../../../", import.meta.url));
/**
 * `SVC_README_RECORD=1` writes this run's answers into the README in place of every answer it shows in full
 * (not those shortened with `…`, which are still checked): how the README's answers are regenerated, all from
 * one real run. A new command's answer can be left as `?` until then.
 */
const RECORD = process.env.SVC_README_RECORD === "1";
/** `SVC_README_SHOW=1` prints every answer as it comes. */
const SHOW = process.env.SVC_README_SHOW === "1";
/** Bounds a broken run only: a faucet payment or a service start on a loaded machine can take a while. */
const COMMAND_TIMEOUT_MS = 240_000;

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const probe = createServer().listen(0, "127.0.0.1", () => {
      const address = probe.address();
      probe.close(() => resolve(typeof address === "object" && address ? address.port : 0));
    });
  });
}

const tail = (file: string, lines = 30) => {
  try {
    return readFileSync(file, "utf8").trimEnd().split("\n").slice(-lines).join("\n");
  } catch {
    return "(no log)";
  }
};

/**
 * Runs the tour of `readme` (a path from the repository root): starts what its first terminal runs
 * (`firstTerminal`, with `PORT`, `SVC_DATA_DIR`, `AUTHZD_HOME` and `AUTHZD_PORT` of its own), then pastes
 * every tour command into a second terminal and checks each answer against the one shown.
 */
async function runTour(
  expect: ExpectStatic,
  readme: string,
  firstTerminal: {
    command: string[];
    healthPath: string;
    port: "PORT" | "AUTHZD_PORT";
    env?: Record<string, string>;
  },
) {
  const file = join(ROOT, readme);
  const steps = parseTour(readFileSync(file, "utf8"));
  expect(steps.filter((s) => s.kind === "command").length).toBeGreaterThan(10);
  const dir = mkdtempSync(join(tmpdir(), "svc-readme-"));
  const ports = { PORT: String(await freePort()), AUTHZD_PORT: String(await freePort()) };
  const env = cleanEnvironment({
    ...ports,
    SVC_DATA_DIR: join(dir, "data"),
    AUTHZD_HOME: join(dir, "authzd"),
  });
  const firstLog = join(dir, "first-terminal.log");
  let first: StartedService | undefined = await StartedService.start({
    cwd: ROOT,
    env: { ...env, ...firstTerminal.env },
    command: firstTerminal.command,
    healthUrl: `http://127.0.0.1:${ports[firstTerminal.port]}${firstTerminal.healthPath}`,
    logFile: firstLog,
  });
  const shell = new ShellSession({ cwd: ROOT, env, logDir: dir });
  const recorded: { step: Extract<TourStep, { kind: "command" }>; actual: string }[] = [];
  try {
    for (const step of steps) {
      if (step.kind === "stop-service") {
        await first?.stop();
        first = undefined;
        continue;
      }
      const where = `${readme}:${step.line}: $ ${step.command.split("\n")[0]}`;
      const run = () =>
        shell.run(step.command, COMMAND_TIMEOUT_MS).catch((error: Error) => {
          const background = readdirSync(dir)
            .filter((f) => f.startsWith("background-"))
            .map((f) => `${f}:\n${tail(join(dir, f))}`);
          throw new Error(
            `${where}\n${error.message}\nfirst terminal:\n${tail(firstLog)}\n${background.join("\n")}`,
          );
        });
      let actual = await run();
      if (SHOW) console.log(`${where}\n${actual}`);
      const expected = step.expected;
      if (expected === undefined) continue;
      if (RECORD && !expected.includes("…")) {
        recorded.push({ step, actual });
        continue;
      }
      if (step.later && !matchesShown(expected, actual)) {
        actual = await eventually(
          async () => {
            actual = await run();
            return matchesShown(expected, actual) && actual;
          },
          {
            timeoutMs: 120_000,
            // What it waits for moves on its own pass: the webhook dispatcher's every 200 ms, the confirmer's
            // every second, the watcher's every 2 s (npm start's defaults).
            intervalMs: 200,
            describe: () => `${where}\nto answer as shown; last answer:\n${actual}`,
          },
        );
      }
      if (!matchesShown(expected, actual)) {
        throw new Error(
          `${where}\nanswered in another shape than the README shows.\nshown (normalised):\n${normalise(expected)}\nanswered:\n${actual}`,
        );
      }
    }
  } finally {
    await shell.close();
    await first?.stop();
    if (RECORD && recorded.length > 0) {
      const lines = readFileSync(file, "utf8").split("\n");
      // From the bottom up, so earlier line numbers stay right.
      for (const { step, actual } of recorded.reverse()) {
        const [from, to] = step.outputLines ?? [0, 0];
        lines.splice(from - 1, to - from + 1, ...actual.trim().split("\n"));
      }
      writeFileSync(file, lines.join("\n"));
    }
    rmSync(dir, { recursive: true, force: true });
  }
}

// The tours run on the embedded store, as the quickstart does; the suite's PostgreSQL pass adds nothing.
// They run at the same time: each has its own ports, data directory and daemon home, and much of each one's
// time is waiting (on a service or daemon starting, the authorization daemon's tour on a reservation's
// 10 s in real time), which the other fills.
describe.skipIf(STORE_KIND === "postgres")("the READMEs' tours, as written", () => {
  it.concurrent("README.md: against npm start, every answer in the shape it shows", async ({ expect }) => {
    await runTour(expect, "README.md", { command: ["npm", "start"], healthPath: "/healthz", port: "PORT" });
  }, 1_800_000);

  it.concurrent("packages/authzd/README.md: against npm run authzd, every answer in the shape it shows", async ({
    expect,
  }) => {
    await runTour(expect, "packages/authzd/README.md", {
      command: ["npm", "run", "authzd"],
      healthPath: "/health",
      port: "AUTHZD_PORT",
      env: { SPEND_AUTHZ_ENABLED: "1" },
    });
  }, 1_800_000);
});
