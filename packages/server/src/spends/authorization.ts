import { eq } from "drizzle-orm";
import type { AuthzdClient, SpendDecision } from "../authzd/client.ts";
import type { ChainKind } from "../chains/registry.ts";
import { transactions } from "../internal/db/schema.ts";
import type { Db } from "../internal/db/store.ts";
import { errors } from "../internal/errors.ts";

/** The `asset` a decision names for a chain's native coin, which has no token address. */
export const NATIVE_ASSET = "native";

/** The facts of a spend that its decision must equal. */
export interface AuthorizedFacts {
  kind: ChainKind;
  /** CAIP-2 id of the chain. */
  network: string;
  /** Token address, or {@link NATIVE_ASSET}. */
  asset: string;
  /** Atomic units. */
  amount: bigint;
  destination: string;
}

/**
 * Checks with the authorization daemon that `decisionId` approved exactly this spend and is still usable:
 * approved, not expired, cancelled or settled, not used by another spend, and for the same network, asset,
 * atomic amount and destination. Runs before the spend's database transaction (it calls the daemon); the
 * unique index on `transactions.spend_decision_id` then makes "one decision, one spend" exact under races.
 * @example await verifySpendAuthorization({ daemon, db }, "dec_…", { kind: "evm", network: "eip155:8453", … });
 */
export async function verifySpendAuthorization(
  deps: { daemon: AuthzdClient | undefined; db: Db },
  decisionId: string,
  facts: AuthorizedFacts,
  now = new Date(),
): Promise<void> {
  if (!deps.daemon) throw errors.authzdNotConfigured();
  const decision = await deps.daemon.lookupDecision(decisionId);
  const refuse = (why: string) =>
    errors.policyViolation("spend_authorization_invalid", `Spend authorization ${decisionId} ${why}`, {
      rule: "spendAuthorization",
      decisionId,
    });
  if (!decision) throw refuse("is unknown to the authorization daemon");
  if (!decision.approved || decision.state === "denied")
    throw refuse(`was denied${decision.reason ? `: ${decision.reason}` : ""}`);
  if (decision.state === "cancelled") throw refuse("was cancelled");
  if (decision.state === "settled") throw alreadyUsed(decisionId);
  if (decision.state === "expired" || decision.expiresAt <= now)
    throw refuse(`expired at ${decision.expiresAt.toISOString()}`);
  checkFacts(decision, facts);
  const [used] = await deps.db
    .select({ id: transactions.id })
    .from(transactions)
    .where(eq(transactions.spendDecisionId, decisionId))
    .limit(1);
  if (used) throw alreadyUsed(decisionId);
}

/** A decision admits one spend; this one has admitted one already. */
export function alreadyUsed(decisionId: string) {
  return errors.policyViolation(
    "spend_authorization_used",
    `Spend authorization ${decisionId} has already been used for another spend`,
    { rule: "spendAuthorization", decisionId },
  );
}

function checkFacts(decision: SpendDecision, facts: AuthorizedFacts): void {
  // EVM addresses and token contracts compare without case (checksums are only case); Solana's exactly.
  const same = (a: string, b: string) =>
    facts.kind === "evm" ? a.toLowerCase() === b.toLowerCase() : a === b;
  const fields: [string, string, string, boolean][] = [
    ["network", decision.network, facts.network, decision.network === facts.network],
    ["asset", decision.asset, facts.asset, same(decision.asset, facts.asset)],
    ["amount", decision.amount, facts.amount.toString(), BigInt(decision.amount) === facts.amount],
    ["destination", decision.destination, facts.destination, same(decision.destination, facts.destination)],
  ];
  for (const [field, authorized, requested, equal] of fields) {
    if (equal) continue;
    throw errors.policyViolation(
      "spend_authorization_mismatch",
      `Spend authorization ${decision.decisionId} was for ${field} ${authorized}; this spend's ${field} is ${requested}`,
      { rule: "spendAuthorization", decisionId: decision.decisionId, field, authorized, requested },
    );
  }
}
