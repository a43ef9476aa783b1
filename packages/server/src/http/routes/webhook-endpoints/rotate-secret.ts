import { z } from "zod";
import {
  DEFAULT_PREVIOUS_SECRET_SECONDS,
  MAX_PREVIOUS_SECRET_SECONDS,
  rotateEndpointSecret,
  toEndpointView,
} from "../../../webhooks/endpoints.ts";
import {
  errorResponses,
  jsonResponse,
  WEBHOOK_ENDPOINT_EXAMPLE,
  webhookEndpointPathParams,
  webhookEndpointView,
} from "../../schemas.ts";
import { type App, principalOf, type Services } from "../../types.ts";

const rotatedWebhookEndpoint = webhookEndpointView
  .extend({
    secret: z.string().meta({
      description: "the new signing secret (`whsec_` and base64): shown here once, never again",
    }),
    previousSecretExpiresAt: z.string().nullable().meta({
      description:
        "until when deliveries carry the replaced secret's signature too (null: from now on only the new one's)",
    }),
  })
  .meta({
    id: "RotatedWebhookEndpoint",
    description: "An endpoint with its new signing secret",
    example: {
      ...WEBHOOK_ENDPOINT_EXAMPLE,
      secret: "whsec_3zq0bW4Hk2nM8pR6tV1xY5cE7gJ9lN2oQ4sU6wA8cE0=",
      previousSecretExpiresAt: "2026-01-02T00:00:00.000Z",
    },
  });

const body = z
  .strictObject({
    previousSecretValidForSeconds: z
      .number()
      .int()
      .min(0)
      .max(MAX_PREVIOUS_SECRET_SECONDS)
      .optional()
      .meta({
        description: `how long deliveries also carry the replaced secret's signature, in seconds (default ${DEFAULT_PREVIOUS_SECRET_SECONDS}, a day; 0 for a leaked secret: never again)`,
      }),
  })
  // No body at all is the default (the parser gives a route with a body schema null for it).
  .nullish()
  .meta({ example: { previousSecretValidForSeconds: 3600 } });

/** POST /v1/webhook-endpoints/:id/rotate-secret: a new signing secret, the old one signing beside it a while. */
export function registerRotateWebhookSecret(app: App, services: Services): void {
  app.route({
    method: "POST",
    url: "/v1/webhook-endpoints/:id/rotate-secret",
    config: { auth: "account", role: "admin" },
    schema: {
      operationId: "rotateWebhookSecret",
      tags: ["webhooks"],
      summary: "Give the endpoint a new signing secret (returned once, here); admin credentials only",
      description: `Deliveries are signed with the new secret at once, and with the one it replaces too (two signatures in \`webhook-signature\`, which Standard Webhooks verifiers accept when either matches) for \`previousSecretValidForSeconds\` more, a day unless told, at most ${MAX_PREVIOUS_SECRET_SECONDS} (a week): time to give the receiver the new secret without a delivery it cannot verify. 0 drops the old secret at once (a leaked one). A secret rotated out before is dropped either way.`,
      params: webhookEndpointPathParams,
      body,
      response: {
        200: jsonResponse("Rotated; the only response that shows the new secret", rotatedWebhookEndpoint),
        ...errorResponses(403, [404, "NotFound: no such endpoint (or deleted) in this account"]),
      },
    },
    handler: async (request) => {
      const { endpoint, secret } = await rotateEndpointSecret(
        services.store.db,
        services.keyring,
        principalOf(request).accountId,
        request.params.id,
        request.body?.previousSecretValidForSeconds ?? DEFAULT_PREVIOUS_SECRET_SECONDS,
        services.now(),
      );
      return {
        ...toEndpointView(endpoint),
        secret,
        previousSecretExpiresAt: endpoint.previousSecretExpiresAt?.toISOString() ?? null,
      };
    },
  });
}
