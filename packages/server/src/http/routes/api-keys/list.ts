import { z } from "zod";
import { listApiKeys, toApiKeyView } from "../../../api-keys/api-keys.ts";
import { apiKeyView, errorResponses, jsonResponse } from "../../schemas.ts";
import { type App, principalOf, type Services } from "../../types.ts";

/** GET /v1/api-keys: the account's active keys, never with their values. */
export function registerListApiKeys(app: App, services: Services): void {
  app.route({
    method: "GET",
    url: "/v1/api-keys",
    config: { auth: "account", role: "admin" },
    schema: {
      operationId: "listApiKeys",
      tags: ["api-keys"],
      summary:
        "List the account's API keys that are not revoked, expired ones included (without key values); admin credentials only",
      response: {
        200: jsonResponse(
          "The keys not revoked (expired ones show their expiresAt), newest first",
          z.array(apiKeyView),
        ),
        ...errorResponses(403),
      },
    },
    handler: async (request) =>
      (await listApiKeys(services.store.db, principalOf(request).accountId)).map(toApiKeyView),
  });
}
