import { type ChildProcess, spawn } from "node:child_process";
import { createServer } from "node:net";
import { fileURLToPath } from "node:url";
import { onTestFinished } from "vitest";
import { ApiClient } from "./api-client.ts";

const MAIN = fileURLToPath(new URL("../../src/main.ts", import.meta.url));
const EXIT_WITH_PARENT = fileURLToPath(new URL("./exit-with-parent.ts", import.meta.url));

/** Service processes of the current test file still running. */
const running = new Set<ChildProcess>();

/**
 * Kills the current file's service processes still running, after its tests (from per-file.ts): a test that
 * fails or times out still ends here, so nothing it started outlives its file. (A worker that dies outright
 * takes its processes along through the preloaded exit-with-parent.)
 */
export async function killFileServiceProcesses(): Promise<void> {
  await Promise.all([...running].map((child) => stopProcess(child, "SIGKILL")));
}

/** A free TCP port on 127.0.0.1. */
export async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const probe = createServer().listen(0, "127.0.0.1", () => {
      const address = probe.address();
      probe.close(() => resolve(typeof address === "object" && address ? address.port : 0));
    });
  });
}

/** A spawned service process. */
export interface ServiceProcess {
  child: ChildProcess;
  /** Resolves with the exit code (null when killed by a signal) once the process has exited. */
  exited: Promise<number | null>;
  /** Signals the process and waits for it to exit; SIGKILL after 10 s. */
  stop(signal?: NodeJS.Signals): Promise<void>;
}

/**
 * Runs the service as `npm start` does (`src/main.ts` under tsx), in its own process, with `env` on top of
 * this process's environment. Killed when the test file ends and when this process dies.
 * @example const service = spawnService({ env: { PORT: "3000" } });
 */
export function spawnService(options: {
  env: Record<string, string>;
  /** Another copy of `src/main.ts` (a different install). */
  main?: string;
  cwd?: string;
  stderr?: "inherit" | "pipe";
  /** Start under this umask (e.g. "022"), as a shell would. */
  umask?: string;
}): ServiceProcess {
  const node = [process.execPath, "--import", "tsx", "--import", EXIT_WITH_PARENT, options.main ?? MAIN];
  // `exec` keeps one process: the pid signalled is the service's own.
  const [command, ...args] = options.umask
    ? ["/bin/sh", "-c", `umask ${options.umask} && exec "$0" "$@"`, ...node]
    : node;
  const child = spawn(command as string, args, {
    env: { ...process.env, ...options.env },
    ...(options.cwd ? { cwd: options.cwd } : {}),
    // stdin stays an open pipe: its end tells the child this process has died.
    stdio: ["pipe", "ignore", options.stderr ?? "inherit"],
  });
  running.add(child);
  try {
    // Started by a test (not a hook): gone as soon as that test ends, passed, failed or timed out.
    onTestFinished(() => stopProcess(child, "SIGKILL"));
  } catch {
    // Started by a hook: the file's afterAll stops it.
  }
  const exited = new Promise<number | null>((resolve) => {
    child.once("exit", (code) => {
      running.delete(child);
      resolve(code);
    });
  });
  return { child, exited, stop: (signal = "SIGTERM") => stopProcess(child, signal) };
}

/**
 * {@link spawnService} on a free port, resolved once `/healthz` answers. Rejects (and kills the process) if
 * it exits first or is not answering within `startTimeoutMs`, which only bounds a broken run.
 */
export async function startServiceProcess(options: {
  env: Record<string, string>;
  main?: string;
  cwd?: string;
  umask?: string;
  startTimeoutMs?: number;
}): Promise<ServiceProcess & { api: ApiClient; url: string }> {
  const port = await freePort();
  const service = spawnService({
    env: { ...options.env, PORT: String(port), HOST: "127.0.0.1" },
    ...(options.main ? { main: options.main } : {}),
    ...(options.cwd ? { cwd: options.cwd } : {}),
    ...(options.umask ? { umask: options.umask } : {}),
  });
  const url = `http://127.0.0.1:${port}`;
  const api = new ApiClient(url);
  let exitCode: number | null | undefined;
  void service.exited.then((code) => {
    exitCode = code;
  });
  const deadline = Date.now() + (options.startTimeoutMs ?? 120_000);
  while (Date.now() < deadline && exitCode === undefined) {
    try {
      if ((await api.get("/healthz")).status === 200) return { ...service, api, url };
    } catch {}
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  await service.stop("SIGKILL");
  throw new Error(
    exitCode === undefined ? "the service did not start in time" : `the service exited with ${exitCode}`,
  );
}

async function stopProcess(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill(signal);
  const force = setTimeout(() => child.kill("SIGKILL"), 10_000);
  await exited;
  clearTimeout(force);
}
