import { z } from "zod";
import { revokeApiKey } from "../../../api-keys/api-keys.ts";
import { endSpendsHeldFor, giveBackAuthorization } from "../../../approvals/approvals.ts";
import { errors } from "../../../internal/errors.ts";
import { describeCredential, hasRole } from "../../access.ts";
import { errorResponses, idParam, noContent } from "../../schemas.ts";
import { spendDeps } from "../../spend-deps.ts";
import { type App, principalOf, type Services } from "../../types.ts";

/** DELETE /v1/api-keys/:id: revoke a key, immediately and for good. */
export function registerRevokeApiKey(app: App, services: Services): void {
  app.route({
    method: "DELETE",
    url: "/v1/api-keys/:id",
    // Any key may revoke itself (giving up power is always allowed); revoking another key needs admin.
    config: { auth: "account", role: "read" },
    schema: {
      operationId: "revokeApiKey",
      tags: ["api-keys"],
      summary: "Revoke an API key (immediate and irreversible); admin credentials, or the key itself",
      description:
        'The spends the key asked for that still wait for approval end with it: `rejected`, `failureReason: "requester_revoked"`, their room in the daily limit given back. Revoking a key that is already revoked answers 204 again (a retried DELETE is harmless); a key the account never had is 404.',
      params: z.object({ id: idParam("key") }),
      response: { 204: noContent("Revoked (or already revoked)"), ...errorResponses(403, 404) },
    },
    handler: async (request, reply) => {
      const principal = principalOf(request);
      const self =
        principal.credential.kind === "api_key" && principal.credential.keyId === request.params.id;
      if (!self && !hasRole(principal, "admin"))
        throw errors.insufficientRole("admin", "Revoking another API key", describeCredential(principal));
      const ended = await revokeApiKey(services.store.db, principal.accountId, request.params.id, {
        alsoInTransaction: (tx, now) => endSpendsHeldFor(tx, request.params.id, now),
        now: services.now(),
      });
      const deps = spendDeps(services);
      await Promise.all((ended ?? []).map((spend) => giveBackAuthorization(deps, spend)));
      return reply.status(204).send(null);
    },
  });
}
