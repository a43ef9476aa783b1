import { deleteEndpoint } from "../../../webhooks/endpoints.ts";
import { errorResponses, noContent, webhookEndpointPathParams } from "../../schemas.ts";
import { type App, principalOf, type Services } from "../../types.ts";

/** DELETE /v1/webhook-endpoints/:id: stop sending to an endpoint, for good. */
export function registerDeleteWebhookEndpoint(app: App, services: Services): void {
  app.route({
    method: "DELETE",
    url: "/v1/webhook-endpoints/:id",
    config: { auth: "account", role: "admin" },
    schema: {
      operationId: "deleteWebhookEndpoint",
      tags: ["webhooks"],
      summary: "Delete a webhook endpoint: nothing more is sent to it; admin credentials only",
      description:
        "An attempt already under way finishes (and is logged); none follows. Deleting a deleted endpoint answers 204 again; one the account never had is 404.",
      params: webhookEndpointPathParams,
      response: {
        204: noContent("Deleted (or already deleted)"),
        ...errorResponses(403, [404, "NotFound: no such endpoint in this account"]),
      },
    },
    handler: async (request, reply) => {
      await deleteEndpoint(
        services.store.db,
        principalOf(request).accountId,
        request.params.id,
        services.now(),
      );
      return reply.status(204).send(null);
    },
  });
}
