import { getPolicy } from "../../../../policy/policy.ts";
import type { App, Services } from "../../../types.ts";
import { registerPolicyRoute } from "./policy-route.ts";

/** GET /v1/wallets/:id/policy: the wallet's spending policy. */
export function registerGetPolicy(app: App, services: Services): void {
  registerPolicyRoute(app, services, {
    method: "GET",
    path: "",
    role: "read",
    operationId: "getPolicy",
    summary: "Get a wallet's spending policy (USD amounts; null = no bound)",
    refusals: [],
    act: (walletId) => getPolicy(services.store.db, walletId),
  });
}
