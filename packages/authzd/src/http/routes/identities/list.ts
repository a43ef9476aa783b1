import type { Route } from "../../types.ts";

/** `GET /identities` (operator): names, budgets and grants; never tokens. */
export const listIdentities: Route = {
  method: "GET",
  path: "/identities",
  auth: "operator",
  handle: ({ service }) => ({ status: 200, body: { identities: service.listIdentities() } }),
};
