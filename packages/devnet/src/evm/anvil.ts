import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

/** A running anvil process. */
export interface AnvilProcess {
  /** `http://127.0.0.1:<port>` */
  readonly rpcUrl: string;
  /** Stops anvil and waits for it to exit. Safe to call twice. */
  stop(): Promise<void>;
}

/** Options for {@link startAnvil}. */
export interface AnvilOptions {
  readonly chainId: number;
  /** Port to listen on; 0 (the default) picks a free one. */
  readonly port?: number;
  /**
   * Give up if anvil has not said where it listens within this many milliseconds; default 60,000 (it takes
   * well under a second on an idle machine, several on a loaded one).
   */
  readonly startTimeoutMs?: number;
}

const PLATFORM_PACKAGES: Record<string, Record<string, string>> = {
  darwin: { x64: "anvil-darwin-amd64", arm64: "anvil-darwin-arm64" },
  linux: { x64: "anvil-linux-amd64", arm64: "anvil-linux-arm64" },
  win32: { x64: "anvil-win32-amd64" },
};

/**
 * Path of the anvil binary shipped in `@foundry-rs/anvil`'s per-platform optional dependency.
 *
 * Resolved directly (not through the wrapper's `bin`) so that nothing depends on the wrapper's postinstall
 * script, which npm 11 does not run unless approved and which would download from outside the registry.
 */
export function anvilBinaryPath(): string {
  const pkg = PLATFORM_PACKAGES[process.platform]?.[process.arch];
  if (pkg === undefined) {
    throw new Error(`anvil: no @foundry-rs/anvil binary for ${process.platform}/${process.arch}`);
  }
  const exe = process.platform === "win32" ? "anvil.exe" : "anvil";
  // Resolve from the wrapper package so its optional dependency is found wherever npm hoisted it.
  const require = createRequire(createRequire(import.meta.url).resolve("@foundry-rs/anvil/package.json"));
  let path: string;
  try {
    path = join(dirname(require.resolve(`@foundry-rs/${pkg}/package.json`)), "bin", exe);
  } catch (cause) {
    throw new Error(`anvil: package @foundry-rs/${pkg} is not installed; run npm install`, { cause });
  }
  if (!existsSync(path)) throw new Error(`anvil: binary missing at ${path}`);
  return path;
}

// A tiny POSIX-sh supervisor: anvil runs in the background and is killed as soon as our end of the pipe on
// the shell's stdin closes — which also happens when this Node process dies without running exit handlers
// (SIGKILL, crash). Keeps test runs from leaving orphaned nodes behind. The shell waits for anvil and exits
// with it, so anvil failing to start (its port taken) is seen at once; the stdin watch runs beside it, on
// a copy of stdin (an asynchronous list's own stdin is /dev/null).
const SUPERVISOR = [
  "exec 3<&0",
  '"$0" "$@" &',
  "pid=$!",
  'echo "svc-devnet anvil pid $pid"',
  "trap 'kill $pid 2>/dev/null; exit 0' TERM INT HUP",
  "(read -r _ignored <&3; kill $pid 2>/dev/null) &",
  "watch=$!",
  "wait $pid",
  "code=$?",
  "kill $watch 2>/dev/null",
  "exit $code",
].join("\n");

interface Running {
  readonly child: ChildProcess;
  /** anvil's own pid once known (the supervisor prints it first). */
  anvilPid: number | undefined;
}

const live = new Set<Running>();
let exitHookInstalled = false;

function killQuietly(pid: number | undefined, signal: NodeJS.Signals): void {
  if (pid === undefined) return;
  try {
    process.kill(pid, signal);
  } catch {
    // already gone
  }
}

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // Only synchronous work is possible here: signal anvil itself, then its supervisor.
  process.once("exit", () => {
    for (const running of live) {
      killQuietly(running.anvilPid, "SIGKILL");
      running.child.kill("SIGKILL");
    }
  });
}

/**
 * Starts anvil on 127.0.0.1 (cancun, the given chain id, no forking: it never touches the network).
 *
 * @example
 * ```ts
 * const anvil = await startAnvil({ chainId: 31337 });
 * console.log(anvil.rpcUrl); // http://127.0.0.1:40123
 * await anvil.stop();
 * ```
 */
/** Seconds between the blocks anvil mines while no transaction comes (Base's block time). */
export const IDLE_BLOCK_SECONDS = 2;

export async function startAnvil(options: AnvilOptions): Promise<AnvilProcess> {
  const args = [
    "--host",
    "127.0.0.1",
    "--port",
    String(options.port ?? 0),
    "--hardfork",
    "cancun",
    "--chain-id",
    String(options.chainId),
    "--accounts",
    "10",
    "--balance",
    "10000",
    "--color",
    "never",
    // Each transaction is mined at once, and an empty block comes every few seconds besides, so the chain's
    // time moves while it is idle, as a real chain's does: what is judged by it (an x402 authorization's
    // validBefore) is decided on an idle local chain too.
    "--mixed-mining",
    "--block-time",
    String(IDLE_BLOCK_SECONDS),
  ];
  const binary = anvilBinaryPath();
  const useSupervisor = process.platform !== "win32";
  const child = useSupervisor
    ? spawn("sh", ["-c", SUPERVISOR, binary, ...args], { stdio: ["pipe", "pipe", "pipe"] })
    : spawn(binary, args, { stdio: ["pipe", "pipe", "pipe"] });
  const running: Running = { child, anvilPid: useSupervisor ? undefined : child.pid };
  live.add(running);
  installExitHook();

  const exited = new Promise<void>((resolve) => {
    child.once("exit", () => {
      live.delete(running);
      resolve();
    });
  });

  let output = "";
  const rpcUrl = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      reject(new Error(`anvil: did not start within ${options.startTimeoutMs ?? 60_000} ms\n${output}`));
    }, options.startTimeoutMs ?? 60_000);
    const onData = (chunk: Buffer): void => {
      output += chunk.toString("utf8");
      const pid = /svc-devnet anvil pid (\d+)/.exec(output);
      if (pid?.[1] !== undefined) running.anvilPid = Number(pid[1]);
      const match = /Listening on (127\.0\.0\.1:\d+)/.exec(output);
      if (match?.[1] !== undefined) {
        clearTimeout(timer);
        child.stdout?.off("data", onData);
        resolve(`http://${match[1]}`);
      }
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", (chunk: Buffer) => {
      output += chunk.toString("utf8");
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      // Its last line says why (`Error: Address already in use (os error 98)`).
      const why = output.trim().split("\n").at(-1) ?? "";
      reject(new Error(`anvil exited with code ${code} before listening: ${why}`));
    });
    child.once("error", (err) => {
      clearTimeout(timer);
      reject(new Error(`anvil: failed to spawn ${binary}`, { cause: err }));
    });
  }).catch(async (err: unknown) => {
    killQuietly(running.anvilPid, "SIGKILL");
    child.kill("SIGKILL");
    throw err;
  });
  // anvil logs every RPC call: keep draining so a full pipe never blocks it.
  child.stdout?.resume();
  child.stderr?.resume();

  let stopping: Promise<void> | undefined;
  return {
    rpcUrl,
    stop() {
      stopping ??= (async () => {
        if (child.exitCode === null && child.signalCode === null) {
          // The supervisor kills anvil and waits for it once its stdin closes.
          if (useSupervisor) child.stdin?.end();
          else child.kill("SIGTERM");
          const force = setTimeout(() => {
            killQuietly(running.anvilPid, "SIGKILL");
            child.kill("SIGKILL");
          }, 3_000);
          await exited;
          clearTimeout(force);
        }
      })();
      return stopping;
    },
  };
}
