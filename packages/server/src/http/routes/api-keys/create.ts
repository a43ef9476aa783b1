import { z } from "zod";
import { createApiKey } from "../../../api-keys/api-keys.ts";
import { apiKeyView, displayName, errorResponses } from "../../schemas.ts";
import { type App, principalOf, type Services } from "../../types.ts";

/** POST /v1/api-keys: create an API key; the only response that ever shows the full key. */
export function registerCreateApiKey(app: App, services: Services): void {
  app.route({
    method: "POST",
    url: "/v1/api-keys",
    config: { auth: "account" },
    schema: {
      tags: ["api-keys"],
      summary: "Create an API key (the full key is returned once, here)",
      body: z.strictObject({ name: displayName }),
      response: { 201: apiKeyView.extend({ key: z.string() }), ...errorResponses() },
    },
    handler: async (request, reply) => {
      const created = await createApiKey(
        services.store.db,
        principalOf(request).accountId,
        request.body.name,
      );
      return reply.status(201).send({
        id: created.id,
        name: created.name,
        key: created.key,
        createdAt: created.createdAt.toISOString(),
        lastUsed: null,
      });
    },
  });
}
