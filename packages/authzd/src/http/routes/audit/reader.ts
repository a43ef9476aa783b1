import type { AuthzService } from "../../../authz/service.ts";
import { errors } from "../../../internal/errors.ts";
import type { Caller } from "../../types.ts";

/** The audit log is readable by the operator and by identities holding `audit.read`. */
export function assertAuditReader(caller: Caller | null, service: AuthzService): void {
  if (caller?.kind === "operator") return;
  if (caller?.kind === "identity" && service.canReadAudit(caller.identity)) return;
  throw errors.missingCapability("audit.read");
}
