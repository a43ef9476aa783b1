import type { Route } from "../../types.ts";

/** `GET /health`: liveness, no token needed. */
export const health: Route = {
  method: "GET",
  path: "/health",
  auth: "none",
  handle: () => ({ status: 200, body: { status: "ok" } }),
};
