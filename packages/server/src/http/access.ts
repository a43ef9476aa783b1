import type { PolicyChanger } from "../policy/policy.ts";
import type { Principal, Role } from "./types.ts";

const RANK: Record<Role, number> = { read: 0, agent: 1, admin: 2 };

/** Whether the principal's role is at least `needed`. */
export function hasRole(principal: Principal, needed: Role): boolean {
  return RANK[principal.role] >= RANK[needed];
}

/** Whether the principal may see and act on the wallet (its account's ownership is checked by the store). */
export function mayActOnWallet(principal: Principal, walletId: string): boolean {
  return principal.walletIds === null || principal.walletIds.includes(walletId);
}

/** How a refusal names the credential that was used, without revealing it. */
export function describeCredential(principal: Principal): string {
  if (principal.credential.kind === "access_token") return "the owner's access token";
  return `${principal.role === "agent" ? "an" : "a"} ${principal.role} key (${principal.credential.keyId})`;
}

/** What the policy needs to know of the caller: only admin credentials may loosen it. */
export function policyChanger(principal: Principal): PolicyChanger {
  return { mayLoosen: hasRole(principal, "admin"), credential: describeCredential(principal) };
}
