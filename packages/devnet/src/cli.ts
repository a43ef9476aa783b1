import { startDevnet } from "./devnet.ts";
import { devnetInfoToJson } from "./json.ts";

/**
 * `svc-devnet`: starts the local chains, prints their facts as one JSON document on stdout and stays up until
 * SIGINT/SIGTERM.
 */
async function main(): Promise<void> {
  const devnet = await startDevnet();
  process.stdout.write(`${JSON.stringify(devnetInfoToJson(devnet), null, 2)}\n`);
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
  process.stderr.write(`svc-devnet: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
