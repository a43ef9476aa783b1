import type { Route } from "../../types.ts";

/** `GET /identities` (operator): names, budgets and grants; never tokens. */
export const listIdentities: Route = {
  method: "GET",
  path: "/identities",
  auth: "operator",
  handle: async ({ service }) => ({ status: 200, body: { identities: await service.listIdentities() } }),
};
