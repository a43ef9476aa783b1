import { archiveWallet } from "../../../wallets/wallets.ts";
import { onWallet } from "../../guards.ts";
import { errorResponses, noContent, walletPathParams } from "../../schemas.ts";
import { type App, principalOf, type Services } from "../../types.ts";

/** DELETE /v1/wallets/:id: archive a wallet; its history stays readable. */
export function registerArchiveWallet(app: App, services: Services): void {
  app.route({
    method: "DELETE",
    url: "/v1/wallets/:id",
    config: onWallet("agent"),
    schema: {
      operationId: "archiveWallet",
      tags: ["wallets"],
      summary: "Archive a wallet (it can no longer spend; history is kept)",
      description:
        "An archived wallet refuses sends, faucet payments and policy changes that loosen its policy (409 `wallet_archived`); it still receives, and its history and balance stay readable. An admin brings it back with `POST /v1/wallets/:id/restore`. Archiving an archived wallet answers 204 again.",
      params: walletPathParams,
      response: { 204: noContent("Archived (or already archived)"), ...errorResponses(403, 404) },
    },
    handler: async (request, reply) => {
      await archiveWallet(services.store.db, principalOf(request).accountId, request.params.id);
      return reply.status(204).send(null);
    },
  });
}
