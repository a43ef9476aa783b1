import { z } from "zod";
import { listApiKeys } from "../../../api-keys/api-keys.ts";
import { apiKeyView, errorResponses } from "../../schemas.ts";
import { type App, principalOf, type Services } from "../../types.ts";

/** GET /v1/api-keys: the account's active keys, never with their values. */
export function registerListApiKeys(app: App, services: Services): void {
  app.route({
    method: "GET",
    url: "/v1/api-keys",
    config: { auth: "account" },
    schema: {
      tags: ["api-keys"],
      summary: "List the account's active API keys (without key values)",
      response: { 200: z.array(apiKeyView), ...errorResponses() },
    },
    handler: async (request) => {
      const keys = await listApiKeys(services.store.db, principalOf(request).accountId);
      return keys.map((key) => ({
        id: key.id,
        name: key.name,
        createdAt: key.createdAt.toISOString(),
        lastUsed: key.lastUsedAt?.toISOString() ?? null,
      }));
    },
  });
}
