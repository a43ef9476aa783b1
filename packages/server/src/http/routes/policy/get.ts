import { z } from "zod";
import { getPolicy } from "../../../policy/policy.ts";
import { findWalletForAccount } from "../../../wallets/wallets.ts";
import { errorResponses, idParam, policyView } from "../../schemas.ts";
import { type App, principalOf, type Services } from "../../types.ts";

/** GET /v1/wallets/:id/policy: the wallet's spending policy. */
export function registerGetPolicy(app: App, services: Services): void {
  app.route({
    method: "GET",
    url: "/v1/wallets/:id/policy",
    config: { auth: "account", role: "read", walletParam: "id" },
    schema: {
      tags: ["policy"],
      summary: "Get a wallet's spending policy (USD amounts; null = no bound)",
      params: z.object({ id: idParam("wal") }),
      response: { 200: policyView, ...errorResponses(404) },
    },
    handler: async (request) => {
      const wallet = await findWalletForAccount(
        services.store.db,
        principalOf(request).accountId,
        request.params.id,
      );
      return getPolicy(services.store.db, wallet.id);
    },
  });
}
