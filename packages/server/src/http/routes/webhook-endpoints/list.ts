import { z } from "zod";
import { listEndpoints, toEndpointView } from "../../../webhooks/endpoints.ts";
import { errorResponses, jsonResponse, webhookEndpointView } from "../../schemas.ts";
import { type App, principalOf, type Services } from "../../types.ts";

/** GET /v1/webhook-endpoints: the account's endpoints, never with their secrets. */
export function registerListWebhookEndpoints(app: App, services: Services): void {
  app.route({
    method: "GET",
    url: "/v1/webhook-endpoints",
    config: { auth: "account", role: "admin" },
    schema: {
      operationId: "listWebhookEndpoints",
      tags: ["webhooks"],
      summary: "List the account's webhook endpoints (without secrets); admin credentials only",
      response: {
        200: jsonResponse(
          "The endpoints not deleted, newest first",
          z.object({ data: z.array(webhookEndpointView) }).meta({
            id: "WebhookEndpointList",
            example: {
              data: [
                {
                  id: "wh_5nR2kW8qT1vY4zB7dF0hJ3",
                  url: "https://example.com/hooks/svc",
                  events: null,
                  description: null,
                  createdAt: "2026-01-01T00:00:00.000Z",
                },
              ],
            },
          }),
        ),
        ...errorResponses(403),
      },
    },
    handler: async (request) => ({
      data: (await listEndpoints(services.store.db, principalOf(request).accountId)).map(toEndpointView),
    }),
  });
}
