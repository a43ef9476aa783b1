import { restoreWallet, toWalletView } from "../../../wallets/wallets.ts";
import { onWallet } from "../../guards.ts";
import { errorResponses, jsonResponse, walletPathParams, walletView } from "../../schemas.ts";
import { type App, principalOf, type Services } from "../../types.ts";

/** POST /v1/wallets/:id/restore: an admin brings an archived wallet back. */
export function registerRestoreWallet(app: App, services: Services): void {
  app.route({
    method: "POST",
    url: "/v1/wallets/:id/restore",
    config: onWallet("admin"),
    schema: {
      operationId: "restoreWallet",
      tags: ["wallets"],
      summary: "Restore an archived wallet (an admin's: it spends again, under its policy)",
      description:
        "The owner's way back from an archive, which an agent key may make: the wallet is `active` again, under the policy it had, and a `wallet.restored` event is written. Restoring an active wallet changes nothing and answers it as it is.",
      params: walletPathParams,
      response: { 200: jsonResponse("The wallet, active", walletView), ...errorResponses(403, 404) },
    },
    handler: async (request) =>
      toWalletView(await restoreWallet(services.store.db, principalOf(request).accountId, request.params.id)),
  });
}
