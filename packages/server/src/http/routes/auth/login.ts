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
        .strictObject({
          email: z.string().min(1).max(254),
          password: z.string().min(1).max(1024),
          deviceToken: z.string().min(1).max(1024).optional().meta({
            description:
              "the `deviceToken` of this client's last login to this email: its attempts are then counted for this device, not for the email, so others guessing the email's password cannot keep it out",
          }),
        })
        .meta({ example: { email: "owner@example.com", password: "correct horse battery staple" } }),
      response: {
        200: jsonResponse(
          "Logged in",
          z
            .object({
              accessToken: z.string().meta({ description: "a JWT; send it as `Authorization: Bearer …`" }),
              expiresIn: z.number().int().meta({ description: "seconds" }),
              deviceToken: z.string().meta({
                description:
                  "keep it and send it with this client's next login to this email (valid 30 days); not a credential",
              }),
            })
            .meta({
              id: "AccessToken",
              example: {
                accessToken: "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1c3JfMSJ9.c2lnbmF0dXJl",
                expiresIn: 3600,
                deviceToken: "eyJhbGciOiJIUzI1NiJ9.eyJhdWQiOiJzdmMtbG9naW4tZGV2aWNlIn0.c2lnbmF0dXJl",
              },
            }),
        ),
        ...errorResponses([401, "Unauthorized `invalid_credentials`: unknown email or wrong password"]),
      },
    },
    handler: async (request) => {
      const limit = services.config.rateLimits.loginAttempts;
      const email = normaliseEmail(request.body.email);
      const device =
        request.body.deviceToken === undefined
          ? undefined
          : await services.loginDevices.deviceOf(request.body.deviceToken, email);
      // Both limits count every attempt: guessing one account's password and spraying many accounts. A
      // device that logged in to this email before is counted by itself, so the email's owner is not kept
      // out by others' guesses (their attempts, without its token, are counted for the email).
      await enforceRateLimit(
        services,
        device === undefined
          ? { key: `login:email:${email}`, limit, scope: "login_email" }
          : { key: `login:device:${device}`, limit, scope: "login_device" },
      );
      await enforceRateLimit(services, {
        key: `login:addr:${addressLimitKey(request.ip)}`,
        limit: limit * 3,
        scope: "login_address",
      });
      const accountId = await verifyLogin(services.store.db, request.body.email, request.body.password);
      return {
        accessToken: await services.accessTokens.issue(accountId),
        expiresIn: ACCESS_TOKEN_TTL_SECONDS,
        deviceToken: await services.loginDevices.issue(email),
      };
    },
  });
}
