import { VERSION } from "../../../version.ts";
import type { Route } from "../../types.ts";

/** `GET /version`: daemon name and version, no token needed. */
export const version: Route = {
  method: "GET",
  path: "/version",
  auth: "none",
  handle: () => ({ status: 200, body: VERSION }),
};
