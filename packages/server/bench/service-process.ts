/**
 * A benchmark's service in a process of its own, as it is deployed: its event loop does not also run the
 * load that measures it. The benchmark forks this file, hands it the store and the local chains over IPC,
 * and asks it over IPC how far the service has got with its background work.
 */
import { type ChildProcess, fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { DevnetInfo } from "@svc/devnet";
import { sql } from "drizzle-orm";
import { chainCursors, transactions } from "../src/internal/db/schema.ts";
import { type StoreLocation, selectRows } from "../src/internal/db/store.ts";
import type { RunningService } from "../src/service.ts";
import { startBenchService } from "./service.ts";

/** The process's name as /proc shows it (at most 15 characters), to read its CPU by. */
export const SERVICE_PROCESS_NAME = "svc-bench-svc";

/** What the service has left to do: spends not yet settled, and the last block of `chain` it scanned. */
export interface Backlog {
  pending: number;
  scannedTo: bigint;
}

type Request =
  | { start: { store: StoreLocation; devnet: DevnetInfo } }
  | { backlog: string }
  | { close: true };
type Answer = { url: string } | { backlog: { pending: number; scanned: string | null } } | { closed: true };

export interface ServiceProcess {
  url: string;
  backlog(chain: string): Promise<Backlog>;
  close(): Promise<void>;
}

/** Forks the service on `store` and the given chains; resolves once it listens. */
export async function forkBenchService(store: StoreLocation, devnet: DevnetInfo): Promise<ServiceProcess> {
  const child = fork(fileURLToPath(import.meta.url), [], {
    execArgv: ["--import", "tsx"],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const next = answers(child);
  const ask = async (request: Request) => {
    child.send(request);
    return next();
  };
  // Only the chains' facts cross: functions (the devnet's stop) stay with the benchmark, which owns the chains.
  const started = await ask({ start: { store, devnet: JSON.parse(JSON.stringify(devnet)) } });
  if (!("url" in started)) throw new Error("the service process did not start");
  return {
    url: started.url,
    async backlog(chain) {
      const answer = await ask({ backlog: chain });
      if (!("backlog" in answer)) throw new Error("the service process answered no backlog");
      return { pending: answer.backlog.pending, scannedTo: BigInt(answer.backlog.scanned ?? "-1") };
    },
    async close() {
      await ask({ close: true });
      const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
      child.disconnect();
      await exited;
    },
  };
}

/** Each call resolves with the child's next message, in order; rejects if it exits first. */
function answers(child: ChildProcess): () => Promise<Answer> {
  const waiting: { resolve(answer: Answer): void; reject(error: Error): void }[] = [];
  child.on("message", (message) => waiting.shift()?.resolve(message as Answer));
  child.on("exit", (code, signal) => {
    for (const waiter of waiting.splice(0))
      waiter.reject(new Error(`the service process exited (${code ?? signal})`));
  });
  return () => new Promise<Answer>((resolve, reject) => waiting.push({ resolve, reject }));
}

/** The forked side: one service, answering the benchmark's requests one at a time. */
async function serve(): Promise<void> {
  process.title = SERVICE_PROCESS_NAME;
  // The benchmark gone (ended, or killed), the service goes too.
  process.on("disconnect", () => process.exit(0));
  let service: RunningService | undefined;
  const reply = (answer: Answer) => process.send?.(answer);
  process.on("message", async (request: Request) => {
    if ("start" in request) {
      service = await startBenchService(request.start.store, request.start.devnet);
      reply({ url: service.url });
    } else if ("backlog" in request && service) {
      const [state] = await selectRows<{ pending: number; scanned: string | null }>(
        service.store.db,
        sql`SELECT (SELECT count(*)::int FROM ${transactions} WHERE ${transactions.status} = 'pending') AS pending,
                   (SELECT max(split_part(${chainCursors.cursor}, ':', 1)::bigint)::text FROM ${chainCursors}
                     WHERE ${chainCursors.chain} = ${request.backlog}) AS scanned`,
      );
      reply({ backlog: { pending: state?.pending ?? 0, scanned: state?.scanned ?? null } });
    } else if ("close" in request) {
      await service?.close();
      reply({ closed: true });
    }
  });
}

if (process.send) await serve();
