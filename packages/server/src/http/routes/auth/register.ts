import { z } from "zod";
import { registerAccount } from "../../../accounts/accounts.ts";
import { addressLimitKey } from "../../../internal/ip-address.ts";
import { enforceRateLimit } from "../../guards.ts";
import { displayName, errorResponses, jsonResponse, timestamp } from "../../schemas.ts";
import type { App, Services } from "../../types.ts";

/** POST /v1/auth/register: create an account. */
export function registerRegister(app: App, services: Services): void {
  app.route({
    method: "POST",
    url: "/v1/auth/register",
    config: { auth: "public" },
    // Every attempt counts, refused ones included, before the body is read: sign-up spam costs one bucket.
    onRequest: async (request) =>
      enforceRateLimit(services, {
        key: `register:addr:${addressLimitKey(request.ip)}`,
        limit: services.config.rateLimits.registrations,
        scope: "registration",
      }),
    schema: {
      operationId: "register",
      tags: ["auth"],
      summary: "Create an account",
      body: z
        .strictObject({
          email: z.email().max(254),
          password: z.string().min(12, "must be at least 12 characters").max(1024),
          name: displayName.optional(),
        })
        .meta({
          example: { email: "owner@example.com", password: "correct horse battery staple", name: "Ada" },
        }),
      response: {
        201: jsonResponse(
          "Account created",
          z
            .object({
              userId: z.string(),
              email: z.string(),
              name: z.string().nullable(),
              createdAt: timestamp,
            })
            .meta({
              id: "Account",
              example: {
                userId: "usr_9fK2mQ7xL4pW1nR8",
                email: "owner@example.com",
                name: "Ada",
                createdAt: "2026-01-01T00:00:00.000Z",
              },
            }),
        ),
        ...errorResponses([409, "ValidationError `email_taken`: an account with this email exists"]),
      },
    },
    handler: async (request, reply) => {
      const account = await registerAccount(services.store.db, request.body);
      return reply.status(201).send({
        userId: account.id,
        email: account.email,
        name: account.name,
        createdAt: account.createdAt.toISOString(),
      });
    },
  });
}
