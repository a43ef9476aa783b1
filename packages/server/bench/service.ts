import { randomBytes } from "node:crypto";
import type { DevnetInfo } from "@svc/devnet";
import { loadConfig } from "../src/internal/config.ts";
import type { StoreLocation } from "../src/internal/db/store.ts";
import { type RunningService, startService } from "../src/service.ts";
import { LogCapture } from "../test/support/api-client.ts";

/**
 * A service on the given store and local chains for a benchmark: fresh secrets, quiet logs, and rate
 * limits far above anything a benchmark sends, so they measure the service and not its limiter.
 */
export function startBenchService(store: StoreLocation, devnet: DevnetInfo): Promise<RunningService> {
  return startService(
    loadConfig({
      PORT: "0",
      LOG_LEVEL: "warn",
      SVC_MASTER_KEY: randomBytes(32).toString("base64"),
      SVC_JWT_SECRET: randomBytes(32).toString("hex"),
      SVC_RATE_LIMIT_PER_MINUTE: "100000000",
      SVC_RATE_LIMIT_PER_ADDRESS_PER_MINUTE: "100000000",
    }),
    { store, devnet, logDestination: new LogCapture() },
  );
}
