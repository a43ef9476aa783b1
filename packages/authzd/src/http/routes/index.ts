import type { Route } from "../types.ts";
import { recentAudit } from "./audit/recent.ts";
import { verifyAudit } from "./audit/verify.ts";
import { getBudget } from "./budgets/get.ts";
import { grantCapability } from "./capabilities/grant.ts";
import { listCapabilities } from "./capabilities/list.ts";
import { revokeCapability } from "./capabilities/revoke.ts";
import { createIdentity } from "./identities/create.ts";
import { listIdentities } from "./identities/list.ts";
import { authorize } from "./spend/authorize.ts";
import { cancel } from "./spend/cancel.ts";
import { consume } from "./spend/consume.ts";
import { getDecision } from "./spend/get-decision.ts";
import { release } from "./spend/release.ts";
import { settle } from "./spend/settle.ts";
import { health } from "./system/health.ts";
import { version } from "./system/version.ts";

/** Every route of the daemon. */
export const routes: Route[] = [
  health,
  version,
  authorize,
  settle,
  cancel,
  getDecision,
  consume,
  release,
  createIdentity,
  listIdentities,
  grantCapability,
  revokeCapability,
  listCapabilities,
  recentAudit,
  verifyAudit,
  getBudget,
];
