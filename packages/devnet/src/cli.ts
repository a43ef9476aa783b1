import { parseArgs } from "node:util";
import { type DevnetOptions, startDevnet } from "./devnet.ts";
import { devnetInfoToJson } from "./json.ts";

const USAGE = `Usage: svc-devnet [--evm-port N] [--solana-port N] [--solana-slot-ms N]

Starts anvil (with USDC) and a Solana JSON-RPC endpoint (LiteSVM, with USDC) on 127.0.0.1, prints their
facts as JSON on stdout and stays up until Ctrl-C. Ports default to free ones. Keys printed are local dev
keys, never valid on a public chain.`;

function port(value: string | undefined, flag: string): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new Error(`${flag}: not a port: ${value}`);
  return n;
}

function options(argv: string[]): DevnetOptions | undefined {
  const { values } = parseArgs({
    args: argv,
    options: {
      "evm-port": { type: "string" },
      "solana-port": { type: "string" },
      "solana-slot-ms": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help === true) return undefined;
  const evmPort = port(values["evm-port"], "--evm-port");
  const solanaPort = port(values["solana-port"], "--solana-port");
  const slotMs = values["solana-slot-ms"] === undefined ? undefined : Number(values["solana-slot-ms"]);
  if (slotMs !== undefined && !(slotMs > 0)) throw new Error("--solana-slot-ms: must be a positive number");
  return {
    ...(evmPort === undefined ? {} : { evmPort }),
    ...(solanaPort === undefined ? {} : { solanaPort }),
    ...(slotMs === undefined ? {} : { solanaSlotMs: slotMs }),
  };
}

/**
 * `svc-devnet`: starts the local chains, prints their facts as one JSON document on stdout and stays up until
 * SIGINT/SIGTERM.
 */
async function main(): Promise<void> {
  const opts = options(process.argv.slice(2));
  if (opts === undefined) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  const devnet = await startDevnet(opts);
  // Pretty-printed, but byte arrays (the Solana secret key) on one line.
  const json = JSON.stringify(devnetInfoToJson(devnet), null, 2).replace(
    /\[\s+([\d,\s]+?)\s+\]/g,
    (_match, inner: string) => `[${inner.split(/\s*,\s*/).join(",")}]`,
  );
  process.stdout.write(`${json}\n`);
  const shutdown = (): void => {
    devnet.stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once("SIGINT", shutdown);
  process.once("SIGTERM", shutdown);
}

main().catch((err: unknown) => {
  // What went wrong, without the stack: a usage error or a port in use is the operator's to fix.
  process.stderr.write(`svc-devnet: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
