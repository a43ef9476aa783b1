import { z } from "zod";
import { archiveWallet } from "../../../wallets/wallets.ts";
import { errorResponses, idParam } from "../../schemas.ts";
import { type App, principalOf, type Services } from "../../types.ts";

/** DELETE /v1/wallets/:id: archive a wallet; its history stays readable. */
export function registerArchiveWallet(app: App, services: Services): void {
  app.route({
    method: "DELETE",
    url: "/v1/wallets/:id",
    config: { auth: "account", role: "agent", walletParam: "id" },
    schema: {
      tags: ["wallets"],
      summary: "Archive a wallet (it can no longer spend; history is kept)",
      params: z.object({ id: idParam("wal") }),
      response: { 204: z.null().meta({ description: "Archived" }), ...errorResponses(403, 404) },
    },
    handler: async (request, reply) => {
      await archiveWallet(services.store.db, principalOf(request).accountId, request.params.id);
      return reply.status(204).send(null);
    },
  });
}
