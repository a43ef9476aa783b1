import { errors } from "../../../internal/errors.ts";
import type { Route } from "../../types.ts";
import { assertAuditReader } from "./reader.ts";

/** `GET /audit/recent?limit=N` (operator or `audit.read`): newest rows, oldest first; limit 1-1000, default 50. */
export const recentAudit: Route = {
  method: "GET",
  path: "/audit/recent",
  auth: "any",
  handle: ({ caller, service, query }) => {
    assertAuditReader(caller, service);
    const raw = query.get("limit") ?? "50";
    const limit = Number(raw);
    if (!/^\d+$/.test(raw) || limit < 1 || limit > 1000) {
      throw errors.invalidQuery("limit must be an integer from 1 to 1000");
    }
    return { status: 200, body: { rows: service.recentAudit(limit) } };
  },
};
