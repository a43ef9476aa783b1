import { z } from "zod";
import { revokeApiKey } from "../../../api-keys/api-keys.ts";
import { errorResponses, idParam } from "../../schemas.ts";
import { type App, principalOf, type Services } from "../../types.ts";

/** DELETE /v1/api-keys/:id: revoke a key, immediately and for good. */
export function registerRevokeApiKey(app: App, services: Services): void {
  app.route({
    method: "DELETE",
    url: "/v1/api-keys/:id",
    config: { auth: "account" },
    schema: {
      tags: ["api-keys"],
      summary: "Revoke an API key (immediate and irreversible)",
      params: z.object({ id: idParam("key") }),
      response: { 204: z.null().meta({ description: "Revoked" }), ...errorResponses(404) },
    },
    handler: async (request, reply) => {
      await revokeApiKey(services.store.db, principalOf(request).accountId, request.params.id);
      return reply.status(204).send(null);
    },
  });
}
