import { findEndpoint, toEndpointView } from "../../../webhooks/endpoints.ts";
import {
  errorResponses,
  jsonResponse,
  webhookEndpointPathParams,
  webhookEndpointView,
} from "../../schemas.ts";
import { type App, principalOf, type Services } from "../../types.ts";

/** GET /v1/webhook-endpoints/:id: one endpoint, without its secret. */
export function registerGetWebhookEndpoint(app: App, services: Services): void {
  app.route({
    method: "GET",
    url: "/v1/webhook-endpoints/:id",
    config: { auth: "account", role: "admin" },
    schema: {
      operationId: "getWebhookEndpoint",
      tags: ["webhooks"],
      summary: "Get a webhook endpoint (without its secret); admin credentials only",
      params: webhookEndpointPathParams,
      response: {
        200: jsonResponse("The endpoint", webhookEndpointView),
        ...errorResponses(403, [404, "NotFound: no such endpoint in this account, or deleted"]),
      },
    },
    handler: async (request) =>
      toEndpointView(
        await findEndpoint(services.store.db, principalOf(request).accountId, request.params.id),
      ),
  });
}
