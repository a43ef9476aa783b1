import { ConfigError, loadConfig } from "./internal/config.ts";
import { DataDirInUseError } from "./internal/data-dir-lock.ts";
import { startService } from "./service.ts";
import { MasterKeyMismatchError } from "./wallets/keyring.ts";

/** `npm start`: the service on its embedded defaults, or on whatever the environment configures. */
async function main(): Promise<void> {
  const config = loadConfig(process.env);
  let stopping = false;
  // Stopped by itself, it has logged why.
  const service = await startService(config, { onStopped: () => process.exit(1) });
  service.app.log.info({ url: service.url, store: service.store.kind }, `Svc listening on ${service.url}`);
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    service.app.log.info({ signal }, "shutting down");
    await service.close();
    process.exit(0);
  };
  process.on("SIGINT", () => void stop("SIGINT"));
  process.on("SIGTERM", () => void stop("SIGTERM"));
}

main().catch((error: unknown) => {
  // One clear line for the failures an operator can fix; the stack for anything else.
  if (
    error instanceof ConfigError ||
    error instanceof MasterKeyMismatchError ||
    error instanceof DataDirInUseError
  ) {
    console.error(`svc: ${error.message}`);
  } else if ((error as NodeJS.ErrnoException).code === "EADDRINUSE") {
    const port = (error as { port?: number }).port;
    console.error(`svc: port ${port} is in use: stop what listens there, or set PORT to another`);
  } else {
    console.error("svc: failed to start:", error);
  }
  process.exit(1);
});
