import { z } from "zod";
import { listDeliveries } from "../../../../webhooks/endpoints.ts";
import {
  errorResponses,
  idParam,
  integerQuery,
  jsonResponse,
  MAX_PAGE_SIZE,
  timestamp,
  webhookEndpointPathParams,
} from "../../../schemas.ts";
import { type App, principalOf, type Services } from "../../../types.ts";

const deliveryExample = {
  eventId: "evt_2mQ8rT4vX6zB1dF3hJ5kL7",
  attempt: 1,
  status: "failed",
  redelivery: false,
  responseStatus: 503,
  error: "HTTP 503: upstream unavailable",
  at: "2026-01-01T00:00:00.000Z",
};

const delivery = z
  .object({
    eventId: z.string(),
    attempt: z
      .number()
      .int()
      .meta({ description: "1 for the first attempt at this event on this endpoint, redeliveries counted" }),
    status: z.enum(["succeeded", "failed", "gave_up"]).meta({
      description:
        "succeeded: answered 2xx; failed: another attempt follows (or a redelivery failed); gave_up: failed after 3 days of retries, the endpoint went on to the next event",
    }),
    redelivery: z.boolean().meta({ description: "sent because of POST …/redeliver" }),
    responseStatus: z.number().int().nullable().meta({
      description: "the receiver's HTTP status; null when none came (refused, unreachable, timeout)",
    }),
    error: z
      .string()
      .optional()
      .meta({ description: "why it failed: the status and the start of the answer, or what went wrong" }),
    at: timestamp,
  })
  .meta({
    id: "WebhookDelivery",
    description: "One attempt to deliver an event to an endpoint",
    example: deliveryExample,
  });

/** GET /v1/webhook-endpoints/:id/deliveries: every attempt, one entry each, newest first. */
export function registerListWebhookDeliveries(app: App, services: Services): void {
  app.route({
    method: "GET",
    url: "/v1/webhook-endpoints/:id/deliveries",
    config: { auth: "account", role: "admin" },
    schema: {
      operationId: "listWebhookDeliveries",
      tags: ["webhooks"],
      summary:
        "The endpoint's delivery attempts, newest first, one entry per attempt; admin credentials only",
      params: webhookEndpointPathParams,
      querystring: z.strictObject({
        eventId: idParam("evt").optional().meta({ description: "only the attempts at this event" }),
        limit: integerQuery("limit", 1, 1_000_000_000).optional(),
      }),
      response: {
        200: jsonResponse(
          "The attempts, newest first (at most limit, default 50, at most 100)",
          z.object({ data: z.array(delivery) }).meta({
            id: "WebhookDeliveryList",
            example: { data: [deliveryExample] },
          }),
        ),
        ...errorResponses(403, [404, "NotFound: no such endpoint in this account, or deleted"]),
      },
    },
    handler: async (request) => ({
      data: await listDeliveries(services.store.db, principalOf(request).accountId, request.params.id, {
        eventId: request.query.eventId,
        limit: Math.min(request.query.limit ?? 50, MAX_PAGE_SIZE),
      }),
    }),
  });
}
