import { z } from "zod";
import { EVENT_TYPES } from "../../../events/events.ts";
import { checkTargetUrl, createEndpoint, toEndpointView } from "../../../webhooks/endpoints.ts";
import {
  errorResponses,
  jsonResponse,
  WEBHOOK_ENDPOINT_EXAMPLE,
  webhookEndpointView,
} from "../../schemas.ts";
import { type App, principalOf, type Services } from "../../types.ts";

const newWebhookEndpoint = webhookEndpointView
  .extend({
    secret: z.string().meta({
      description:
        "the signing secret (`whsec_` and base64): shown here once, never again (`POST …/rotate-secret` gives a new one). Verify each delivery's `webhook-signature` with it",
    }),
  })
  .meta({
    id: "NewWebhookEndpoint",
    description: "An endpoint just created, with its signing secret",
    example: { ...WEBHOOK_ENDPOINT_EXAMPLE, secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" },
  });

const body = z
  .strictObject({
    url: z
      .string()
      .trim()
      .min(1)
      .max(2000)
      .meta({ description: "an http:// or https:// URL; events are POSTed to it", format: "uri" }),
    events: z
      .array(z.enum(EVENT_TYPES))
      .min(1)
      .max(EVENT_TYPES.length)
      .optional()
      .meta({ description: "the event types to send; omitted = every type" }),
    description: z.string().trim().max(500).optional(),
  })
  .meta({
    example: {
      url: "https://example.com/hooks/svc",
      events: ["transaction.confirmed", "spend.alert", "approval.requested"],
      description: "ops alerts",
    },
  });

/** POST /v1/webhook-endpoints: register a URL for the account's events; the only response with its secret. */
export function registerCreateWebhookEndpoint(app: App, services: Services): void {
  app.route({
    method: "POST",
    url: "/v1/webhook-endpoints",
    config: { auth: "account", role: "admin" },
    schema: {
      operationId: "createWebhookEndpoint",
      tags: ["webhooks"],
      summary:
        "Register a webhook endpoint (its signing secret is returned once, here); admin credentials only",
      description:
        "The endpoint receives the events that commit after its creation, of the types in `events` (every type when omitted), one at a time in order: the next is sent once the current one is answered 2xx or given up. Each is a POST of `{ type, timestamp, data }` with the Standard Webhooks headers `webhook-id` (the event's id), `webhook-timestamp` and `webhook-signature`. A failed delivery is retried 5 s later, then 30 s, then at growing intervals for up to 3 days. The URL passes the outbound guard: private, loopback and link-local addresses are refused unless `SVC_OUTBOUND_ALLOW` exempts them, and the service's own backends (its chain nodes, the service itself) always. At creation, such an address, given as such or as a hostname resolving to it now, is 400 `destination_not_allowed`; each delivery checks the hostname again, on what it then resolves to. At most 20 endpoints per account.",
      body,
      response: {
        201: jsonResponse("Created; the only response that shows the secret", newWebhookEndpoint),
        ...errorResponses(
          [
            400,
            "ValidationError: `invalid_body` (not an http(s) URL, an unknown event type), or `destination_not_allowed` (a private, loopback or link-local address, by itself or by what the hostname resolves to, or one of the service's own backends)",
          ],
          403,
          [409, "ValidationError `too_many_webhook_endpoints`: the account has 20 already"],
        ),
      },
    },
    handler: async (request, reply) => {
      const url = await checkTargetUrl(request.body.url, services.webhookOutbound);
      const { endpoint, secret } = await createEndpoint(
        services.store.db,
        services.keyring,
        principalOf(request).accountId,
        { url: url.href, events: request.body.events, description: request.body.description },
      );
      return reply.status(201).send({ ...toEndpointView(endpoint), secret });
    },
  });
}
