import type { SpendDeps } from "../spends/send.ts";
import type { Services } from "./types.ts";

/** What the spend pipeline needs, taken from the service's parts: one place for every spending route. */
export function spendDeps(services: Services): SpendDeps {
  return {
    db: services.store.db,
    keyring: services.keyring,
    chainClient: (name: string) => services.chains.client(name),
    authzd: services.authzd,
    now: services.now,
    approvalTtlMs: services.config.approvalTtlSeconds * 1000,
  };
}
