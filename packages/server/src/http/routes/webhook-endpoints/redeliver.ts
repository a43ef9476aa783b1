import { z } from "zod";
import { MAX_QUEUED_REDELIVERIES, requestRedelivery } from "../../../webhooks/endpoints.ts";
import { errorResponses, idParam, jsonResponse, webhookEndpointPathParams } from "../../schemas.ts";
import { type App, principalOf, type Services } from "../../types.ts";

/** POST /v1/webhook-endpoints/:id/redeliver: send one event to the endpoint again. */
export function registerRedeliverWebhook(app: App, services: Services): void {
  app.route({
    method: "POST",
    url: "/v1/webhook-endpoints/:id/redeliver",
    config: { auth: "account", role: "admin" },
    schema: {
      operationId: "redeliverWebhook",
      tags: ["webhooks"],
      summary: "Send an event to the endpoint once more; admin credentials only",
      description: `Queued and sent within moments, outside the endpoint's order and whatever became of the event before: one attempt, signed afresh, logged in the deliveries with \`redelivery: true\` (ask again if it fails). At most ${MAX_QUEUED_REDELIVERIES} wait per endpoint. The event must be the account's and of a type the endpoint receives.`,
      params: webhookEndpointPathParams,
      body: z
        .strictObject({ eventId: idParam("evt") })
        .meta({ example: { eventId: "evt_2mQ8rT4vX6zB1dF3hJ5kL7" } }),
      response: {
        202: jsonResponse(
          "Queued",
          z
            .object({ queued: z.literal(true), eventId: z.string() })
            .meta({ example: { queued: true, eventId: "evt_2mQ8rT4vX6zB1dF3hJ5kL7" } }),
        ),
        ...errorResponses(
          403,
          [404, "NotFound: no such endpoint (or deleted), or no such event, in this account"],
          [
            409,
            `ValidationError \`event_not_subscribed\`: the endpoint does not receive this event's type; \`too_many_redeliveries\`: ${MAX_QUEUED_REDELIVERIES} are waiting for this endpoint already`,
          ],
        ),
      },
    },
    handler: async (request, reply) => {
      await requestRedelivery(
        services.store.db,
        principalOf(request).accountId,
        request.params.id,
        request.body.eventId,
      );
      return reply.status(202).send({ queued: true as const, eventId: request.body.eventId });
    },
  });
}
