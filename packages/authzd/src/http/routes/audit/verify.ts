import type { Route } from "../../types.ts";
import { assertAuditReader } from "./reader.ts";

/** `GET /audit/verify` (operator or `audit.read`): `{ rows, valid, headHash, firstBadIndex?, problem? }`. */
export const verifyAudit: Route = {
  method: "GET",
  path: "/audit/verify",
  auth: "any",
  handle: async ({ caller, service }) => {
    assertAuditReader(caller, service);
    return { status: 200, body: await service.verifyAudit() };
  },
};
