import { z } from "zod";
import { policyInputSchema, updatePolicy } from "../../../policy/policy.ts";
import { findWalletForAccount } from "../../../wallets/wallets.ts";
import { errorResponses, idParam, policyView } from "../../schemas.ts";
import { type App, principalOf, type Services } from "../../types.ts";

/** PATCH /v1/wallets/:id/policy: change any subset of the bounds and the whitelist. */
export function registerUpdatePolicy(app: App, services: Services): void {
  app.route({
    method: "PATCH",
    url: "/v1/wallets/:id/policy",
    config: { auth: "account" },
    schema: {
      tags: ["policy"],
      summary:
        "Change a wallet's spending policy (any subset of maxPerTx, dailyLimit, whitelist, alertAbove)",
      params: z.object({ id: idParam("wal") }),
      body: policyInputSchema,
      response: { 200: policyView, ...errorResponses(404) },
    },
    handler: async (request) => {
      const wallet = await findWalletForAccount(
        services.store.db,
        principalOf(request).accountId,
        request.params.id,
      );
      return updatePolicy(services.store.db, wallet.id, request.body);
    },
  });
}
