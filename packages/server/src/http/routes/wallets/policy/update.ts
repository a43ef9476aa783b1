import { updatePolicy } from "../../../../policy/policy.ts";
import { policyInput } from "../../../schemas.ts";
import type { App, Services } from "../../../types.ts";
import { registerPolicyRoute } from "./policy-route.ts";

/** PATCH /v1/wallets/:id/policy: change any subset of the bounds and the whitelist. */
export function registerUpdatePolicy(app: App, services: Services): void {
  registerPolicyRoute(app, services, {
    method: "PATCH",
    path: "",
    role: "agent",
    operationId: "updatePolicy",
    summary: "Change a wallet's spending policy (any subset of its fields)",
    description:
      "Agent keys may only tighten: set or lower a bound, narrow the whitelist, require spend authorizations. Raising or removing a bound, adding whitelist entries, emptying the whitelist and turning off requireSpendAuthorization need an admin credential (403 Forbidden `insufficient_role`; nothing changes). An archived wallet's policy may be tightened but never loosened, by anyone (409 `wallet_archived`).",
    body: policyInput(services.chains),
    refusals: [
      [403, "Forbidden `insufficient_role`: the change loosens the policy and the credential is not admin"],
      [409, "ValidationError `wallet_archived`: the change loosens an archived wallet's policy"],
    ],
    act: (walletId, changer, change) => updatePolicy(services.store.db, walletId, change, changer),
  });
}
