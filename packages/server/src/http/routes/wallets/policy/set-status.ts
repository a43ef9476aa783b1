import { setPolicyStatus } from "../../../../policy/policy.ts";
import type { App, Services } from "../../../types.ts";
import { registerPolicyRoute } from "./policy-route.ts";

/** POST /v1/wallets/:id/policy/pause and /resume: stop or restart all spending from the wallet. */
export function registerSetPolicyStatus(app: App, services: Services): void {
  // Pausing only ever makes spending safer, so an agent may, even on an archived wallet; resuming lifts a
  // stop: it needs the owner, and an active wallet.
  registerPolicyRoute(app, services, {
    method: "POST",
    path: "/pause",
    role: "agent",
    operationId: "pausePolicy",
    summary: "Pause all spending from the wallet",
    refusals: [403],
    act: (walletId, changer) => setPolicyStatus(services.store.db, walletId, "paused", changer),
  });
  registerPolicyRoute(app, services, {
    method: "POST",
    path: "/resume",
    role: "admin",
    operationId: "resumePolicy",
    summary: "Resume spending from the wallet (admin credentials only)",
    refusals: [403, [409, "ValidationError `wallet_archived`: an archived wallet stays paused"]],
    act: (walletId, changer) => setPolicyStatus(services.store.db, walletId, "active", changer),
  });
}
