import { z } from "zod";
import { ACCESS_TOKEN_TTL_SECONDS } from "../../../accounts/access-tokens.ts";
import { normaliseEmail, verifyLogin } from "../../../accounts/accounts.ts";
import { addressLimitKey } from "../../../internal/ip-address.ts";
import { enforceRateLimit } from "../../guards.ts";
import { errorResponses, jsonResponse } from "../../schemas.ts";
import type { App, Services } from "../../types.ts";

/** POST /v1/auth/login: exchange email and password for an access token. */
export function registerLogin(app: App, services: Services): void {
  app.route({
    method: "POST",
    url: "/v1/auth/login",
    config: { auth: "public" },
    schema: {
      operationId: "login",
      tags: ["auth"],
      summary: "Log in and receive an access token (valid 3600 s)",
      body: z
        .strictObject({ email: z.string().min(1).max(254), password: z.string().min(1).max(1024) })
        .meta({ example: { email: "owner@example.com", password: "correct horse battery staple" } }),
      response: {
        200: jsonResponse(
          "Logged in",
          z
            .object({
              accessToken: z.string().meta({ description: "a JWT; send it as `Authorization: Bearer …`" }),
              expiresIn: z.number().int().meta({ description: "seconds" }),
            })
            .meta({
              id: "AccessToken",
              example: {
                accessToken: "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1c3JfMSJ9.c2lnbmF0dXJl",
                expiresIn: 3600,
              },
            }),
        ),
        ...errorResponses([401, "Unauthorized `invalid_credentials`: unknown email or wrong password"]),
      },
    },
    handler: async (request) => {
      const limit = services.config.rateLimits.loginAttempts;
      // Both limits count every attempt: guessing one account's password and spraying many accounts.
      await enforceRateLimit(services, {
        key: `login:email:${normaliseEmail(request.body.email)}`,
        limit,
        scope: "login_email",
      });
      await enforceRateLimit(services, {
        key: `login:addr:${addressLimitKey(request.ip)}`,
        limit: limit * 3,
        scope: "login_address",
      });
      const accountId = await verifyLogin(services.store.db, request.body.email, request.body.password);
      return {
        accessToken: await services.accessTokens.issue(accountId),
        expiresIn: ACCESS_TOKEN_TTL_SECONDS,
      };
    },
  });
}
