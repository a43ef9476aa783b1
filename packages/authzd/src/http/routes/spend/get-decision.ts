import { lastSegment } from "../../fields.ts";
import type { Route } from "../../types.ts";

/**
 * `GET /spend/decisions/:id` (`wallet.spend.verify`): any payer's decision with its state now, for the
 * wallet service to check a spend before signing. 404 `decision_not_found` for an unknown or malformed
 * id. Writes no audit row.
 */
export const getDecision: Route = {
  method: "GET",
  path: "/spend/decisions/:name",
  auth: "identity",
  handle: async ({ caller, service, path }) => {
    if (caller?.kind !== "identity") throw new Error("identity route reached without an identity");
    service.admitSpend(caller.identity, "wallet.spend.verify");
    return { status: 200, body: await service.lookupDecision(lastSegment(path)) };
  },
};
