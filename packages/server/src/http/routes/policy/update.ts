import { z } from "zod";
import { policyInputSchema, updatePolicy } from "../../../policy/policy.ts";
import { findWalletForAccount } from "../../../wallets/wallets.ts";
import { policyChanger } from "../../access.ts";
import { errorResponses, idParam, policyView } from "../../schemas.ts";
import { type App, principalOf, type Services } from "../../types.ts";

/** PATCH /v1/wallets/:id/policy: change any subset of the bounds and the whitelist. */
export function registerUpdatePolicy(app: App, services: Services): void {
  app.route({
    method: "PATCH",
    url: "/v1/wallets/:id/policy",
    config: { auth: "account", role: "agent", walletParam: "id" },
    schema: {
      tags: ["policy"],
      summary: "Change a wallet's spending policy (any subset of its fields)",
      description:
        "Agent keys may only tighten: set or lower a bound, narrow the whitelist, require spend authorizations. Raising or removing a bound, adding whitelist entries, emptying the whitelist and turning off requireSpendAuthorization need an admin credential (403 Forbidden `insufficient_role`; nothing changes).",
      params: z.object({ id: idParam("wal") }),
      body: policyInputSchema,
      response: { 200: policyView, ...errorResponses(403, 404) },
    },
    handler: async (request) => {
      const principal = principalOf(request);
      const wallet = await findWalletForAccount(services.store.db, principal.accountId, request.params.id);
      return updatePolicy(services.store.db, wallet.id, request.body, policyChanger(principal));
    },
  });
}
