import { z } from "zod";
import { setPolicyStatus } from "../../../policy/policy.ts";
import { findWalletForAccount } from "../../../wallets/wallets.ts";
import { errorResponses, idParam, policyView } from "../../schemas.ts";
import { type App, principalOf, type Services } from "../../types.ts";

/** POST /v1/wallets/:id/policy/pause and /resume: stop or restart all spending from the wallet. */
export function registerSetPolicyStatus(app: App, services: Services): void {
  for (const [action, status] of [
    ["pause", "paused"],
    ["resume", "active"],
  ] as const) {
    app.route({
      method: "POST",
      url: `/v1/wallets/:id/policy/${action}`,
      config: { auth: "account" },
      schema: {
        tags: ["policy"],
        summary:
          action === "pause" ? "Pause all spending from the wallet" : "Resume spending from the wallet",
        params: z.object({ id: idParam("wal") }),
        response: { 200: policyView, ...errorResponses(404) },
      },
      handler: async (request) => {
        const wallet = await findWalletForAccount(
          services.store.db,
          principalOf(request).accountId,
          request.params.id,
        );
        return setPolicyStatus(services.store.db, wallet.id, status);
      },
    });
  }
}
