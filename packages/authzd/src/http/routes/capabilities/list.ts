import type { Route } from "../../types.ts";

/** `GET /capabilities?identity=NAME` (operator): grants of one identity, or of all. */
export const listCapabilities: Route = {
  method: "GET",
  path: "/capabilities",
  auth: "operator",
  handle: async ({ service, query }) => ({
    status: 200,
    body: { grants: await service.listGrants(query.get("identity") ?? undefined) },
  }),
};
