import type { AuthzdClient, SpendDecision } from "../authzd/client.ts";
import { sameAddress } from "../chains/addresses.ts";
import type { ChainKind } from "../chains/registry.ts";
import { AppError, errors } from "../internal/errors.ts";
import { type SpendFacts, unpricedToken } from "../policy/rules.ts";

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
  /** What the spend is worth in USD millionths (undefined: its token has no price), and what it spends. */
  usdMicros: bigint | undefined;
  token: string;
  chain: string;
}

/** A daemon credit is one US cent. */
const MICROS_PER_CREDIT = 10_000n;

/**
 * Consumes `decisionId` at the authorization daemon for this spend, before anything is signed: the daemon
 * takes it atomically only if it is approved, unexpired, and neither cancelled, settled, released nor
 * consumed already, and from then on the agent can no longer cancel it (which would give back the credits
 * of a spend that was made). Then its network, asset, atomic amount and destination must equal the
 * spend's, and its credits (which the agent stated, and the daemon's budget counts) must be at least what
 * the spend is worth; if not, the decision is released again and the spend refused. Runs before the spend's
 * database transaction (it calls the daemon); the unique index on `transactions.spend_decision_id` stays
 * as this service's own guard of "one decision, one spend".
 *
 * Once this returns the decision, the caller owns the consumption: if the spend is refused before it is
 * recorded, it calls {@link releaseRefusedSpendAuthorization}. A spend found to be worth more once planned
 * (the rent of a token account it opens) is checked again with {@link checkCreditsCoverSpend}.
 * @example await consumeSpendAuthorization(daemon, "dec_…", { kind: "evm", network: "eip155:8453", … });
 */
export async function consumeSpendAuthorization(
  daemon: AuthzdClient | undefined,
  decisionId: string,
  facts: AuthorizedFacts,
): Promise<SpendDecision> {
  if (!daemon) throw errors.authzdNotConfigured();
  const answer = await daemon.consumeDecision(decisionId);
  if (!answer.consumed)
    throw notConsumable(decisionId, answer.decision, answer.decision ? answer.code : undefined);
  try {
    checkFacts(answer.decision, facts);
  } catch (error) {
    await daemon.releaseDecision(decisionId);
    throw error;
  }
  return answer.decision;
}

/**
 * Gives back a decision consumed by {@link consumeSpendAuthorization} when its spend was refused before it
 * was recorded, so the agent's credits return for a spend that moved nothing. Only for a refusal this
 * service made itself (an {@link AppError}: policy, funds, archived wallet, an unreachable chain...),
 * which is thrown before the spend's transaction or inside it and so rolls it back. Anything else (a
 * database fault, which could even be a lost answer to a COMMIT that happened) leaves it consumed: its
 * credits stay counted (fail closed). So does a collision on the one-spend-per-decision index, which
 * means another recorded spend holds the decision. Best effort: a daemon that does not answer is logged
 * by the client and the refusal stands.
 * @example await releaseRefusedSpendAuthorization(daemon, "dec_…", error);
 */
export async function releaseRefusedSpendAuthorization(
  daemon: AuthzdClient | undefined,
  decisionId: string,
  refusal: unknown,
): Promise<void> {
  if (!daemon || !(refusal instanceof AppError)) return;
  // Another recorded spend holds the decision: its credits are that spend's.
  if (refusal.reason === "spend_authorization_used") return;
  await daemon.releaseDecision(decisionId);
}

/** A decision admits one spend; this one has admitted one already. */
export function alreadyUsed(decisionId: string) {
  return errors.policyViolation(
    "spend_authorization_used",
    `Spend authorization ${decisionId} has already been used for another spend`,
    { rule: "spendAuthorization", decisionId },
  );
}

/**
 * A held spend's decision, consumed when the spend was asked, that the daemon no longer knows: it forgets a
 * decision one budget window after its reservation lapsed, when it no longer counts in any budget. The held
 * spend can no longer be approved against it; rejecting it ends it.
 */
export function decisionForgotten(decisionId: string) {
  return invalidAuthorization(
    decisionId,
    "is one the authorization daemon no longer knows (it forgets a decision once its budget window has passed): this held spend cannot be approved against it; reject it, and ask again with a new decision",
  );
}

function invalidAuthorization(decisionId: string, why: string) {
  return errors.policyViolation("spend_authorization_invalid", `Spend authorization ${decisionId} ${why}`, {
    rule: "spendAuthorization",
    decisionId,
  });
}

/** Why the daemon would not let this spend consume `decision` (undefined: it knows no such decision). */
function notConsumable(decisionId: string, decision: SpendDecision | undefined, code?: string) {
  const refuse = (why: string) => invalidAuthorization(decisionId, why);
  if (!decision) return refuse("is unknown to the authorization daemon");
  if (code === "payer_not_authorized")
    return refuse(
      `was made by ${decision.payer}, who may no longer authorize spends (its capability was revoked)`,
    );
  switch (decision.state) {
    case "denied":
      return refuse(`was denied${decision.reason ? `: ${decision.reason}` : ""}`);
    case "cancelled":
      return refuse("was cancelled");
    case "released":
      return refuse("was given back after an earlier spend carrying it was refused; ask for a new one");
    case "settled":
    case "consumed":
      return alreadyUsed(decisionId);
    default:
      return refuse(`expired at ${decision.expiresAt.toISOString()}`);
  }
}

function checkFacts(decision: SpendDecision, facts: AuthorizedFacts): void {
  const same = (a: string, b: string) => sameAddress(facts.kind, a, b);
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
  checkCreditsCover(decision, facts);
}

/**
 * {@link checkCreditsCover} for a spend as the policy counts it once planned (`withRecipientAccountRent`):
 * its amount's worth and the rent of a token account it opens for its recipient; without a USD value, the
 * refusal names the token that has no price.
 */
export function checkCreditsCoverSpend(decision: SpendDecision, spend: SpendFacts): void {
  checkCreditsCover(decision, {
    usdMicros: spend.usdMicros,
    token: unpricedToken(spend).symbol,
    chain: spend.chain,
  });
}

/**
 * Refuses a spend worth more than the credits of its decision: the daemon's budget counts the credits the
 * agent stated, and fewer than the spend is worth would let it spend past its budget. A spend's worth is
 * what the policy counts: its amount's, and the rent of a token account it opens for its recipient.
 */
function checkCreditsCover(
  decision: SpendDecision,
  /** `token`: the symbol a refusal names when the spend has no USD value (the token without a price). */
  facts: Pick<AuthorizedFacts, "usdMicros" | "token" | "chain">,
): void {
  if (facts.usdMicros === undefined) {
    throw errors.policyViolation(
      "price_unavailable",
      `No USD price is known for ${facts.token} on ${facts.chain}, so this spend cannot be checked against its authorization's credits`,
      { rule: "price", token: facts.token, chain: facts.chain },
    );
  }
  const cents = (facts.usdMicros + MICROS_PER_CREDIT - 1n) / MICROS_PER_CREDIT;
  const worth = cents < 1n ? 1n : cents;
  if (BigInt(decision.credits) < worth) {
    throw errors.policyViolation(
      "spend_authorization_mismatch",
      `Spend authorization ${decision.decisionId} was for ${decision.credits} credits; this spend is worth ${worth} (US cents)`,
      {
        rule: "spendAuthorization",
        decisionId: decision.decisionId,
        field: "credits",
        authorized: String(decision.credits),
        requested: worth.toString(),
      },
    );
  }
}
