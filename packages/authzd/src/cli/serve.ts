/**
 * `authzd serve`: starts the daemon on the environment's configuration, prints where it listens, and stops
 * it on SIGINT or SIGTERM (an exit of 0 once the audit log is flushed). `options.now` is for the test
 * harness's movable clock (testing.ts); the CLI gives none.
 */
import { type DaemonOptions, startDaemon } from "../daemon.ts";
import { loadConfig } from "../internal/config.ts";

export async function serve(options: Pick<DaemonOptions, "now"> = {}): Promise<void> {
  const config = loadConfig();
  const daemon = await startDaemon(config, {
    ...options,
    onFatal: () => {
      // The log may end in a partial line; exiting lets a restart scan, repair and rebuild.
      setTimeout(() => process.exit(1), 100);
    },
  });
  process.stdout.write(
    `authzd listening on ${daemon.url} (home ${config.home}, spend authorization ${config.spendAuthzEnabled ? "enabled" : "disabled: set SPEND_AUTHZ_ENABLED=1"})\n`,
  );
  let closing = false;
  const stop = (): void => {
    if (closing) return;
    closing = true;
    daemon.close().then(
      () => process.exit(0),
      (error: unknown) => {
        process.stderr.write(`authzd: error while stopping: ${(error as Error).message}\n`);
        process.exit(1);
      },
    );
  };
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
}
