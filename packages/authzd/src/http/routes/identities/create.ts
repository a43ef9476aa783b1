import { objectWithKeys, optionalAtomic, optionalCount, stringField } from "../../fields.ts";
import type { Route } from "../../types.ts";

/**
 * `POST /identities` `{ name, budget_credits?, max_per_call_cap? }` (operator): 201 with the token,
 * shown once.
 */
export const createIdentity: Route = {
  method: "POST",
  path: "/identities",
  auth: "operator",
  handle: async ({ service, json }) => {
    const body = objectWithKeys(json(), ["name"], ["budget_credits", "max_per_call_cap"]);
    const created = await service.createIdentity(
      stringField(body, "name"),
      optionalCount(body, "budget_credits"),
      optionalAtomic(body, "max_per_call_cap"),
    );
    return { status: 201, body: created };
  },
};
