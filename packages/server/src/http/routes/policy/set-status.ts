import { z } from "zod";
import { setPolicyStatus } from "../../../policy/policy.ts";
import { findWalletForAccount } from "../../../wallets/wallets.ts";
import { policyChanger } from "../../access.ts";
import { errorResponses, idParam, policyView } from "../../schemas.ts";
import { type App, principalOf, type Services } from "../../types.ts";

/** POST /v1/wallets/:id/policy/pause and /resume: stop or restart all spending from the wallet. */
export function registerSetPolicyStatus(app: App, services: Services): void {
  // Pausing only ever makes spending safer, so an agent may; resuming lifts a stop and needs the owner.
  for (const [action, status, role] of [
    ["pause", "paused", "agent"],
    ["resume", "active", "admin"],
  ] as const) {
    app.route({
      method: "POST",
      url: `/v1/wallets/:id/policy/${action}`,
      config: { auth: "account", role, walletParam: "id" },
      schema: {
        tags: ["policy"],
        summary:
          action === "pause" ? "Pause all spending from the wallet" : "Resume spending from the wallet",
        params: z.object({ id: idParam("wal") }),
        response: { 200: policyView, ...errorResponses(403, 404) },
      },
      handler: async (request) => {
        const principal = principalOf(request);
        const wallet = await findWalletForAccount(services.store.db, principal.accountId, request.params.id);
        return setPolicyStatus(services.store.db, wallet.id, status, policyChanger(principal));
      },
    });
  }
}
