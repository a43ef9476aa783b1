import { endAccessToken } from "../../../accounts/accounts.ts";
import { errors } from "../../../internal/errors.ts";
import { errorResponses, noContent } from "../../schemas.ts";
import { type App, principalOf, type Services } from "../../types.ts";

/**
 * POST /v1/auth/logout: ends the login access token this request is made with, on every instance, before
 * it expires (a copied token stops working). Made with an API key, it is refused: keys are revoked.
 */
export function registerLogout(app: App, services: Services): void {
  app.route({
    method: "POST",
    url: "/v1/auth/logout",
    config: { auth: "account", role: "admin" },
    schema: {
      operationId: "logout",
      tags: ["auth"],
      summary: "End this login's access token before it expires",
      response: {
        204: noContent("Logged out: the token is refused from now on"),
        ...errorResponses([
          400,
          "ValidationError `not_an_access_token`: made with an API key (revoke it with DELETE /v1/api-keys/:id)",
        ]),
      },
    },
    handler: async (request, reply) => {
      const { accountId, credential } = principalOf(request);
      if (credential.kind !== "access_token") throw errors.notALogin();
      await endAccessToken(services.store.db, { accountId, ...credential });
      return reply.status(204).send(null);
    },
  });
}
