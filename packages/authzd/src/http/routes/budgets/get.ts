import { errors } from "../../../internal/errors.ts";
import { lastSegment } from "../../fields.ts";
import type { Route } from "../../types.ts";

/** `GET /budgets/:name` (operator, or the identity itself): reserved, settled and available credits. */
export const getBudget: Route = {
  method: "GET",
  path: "/budgets/:name",
  auth: "any",
  handle: async ({ caller, service, path }) => {
    const name = lastSegment(path);
    if (caller?.kind === "identity" && caller.identity.name !== name) {
      throw errors.forbidden("an identity may read only its own budget");
    }
    return { status: 200, body: await service.budget(name) };
  },
};
