import type { TokenInfo } from "../chains/types.ts";
import { errors } from "../internal/errors.ts";
import { formatUsd } from "../internal/money.ts";
import { type PolicyRow, sameRecipient } from "./policy.ts";

/** A spend as the policy sees it. */
export interface SpendFacts {
  walletId: string;
  type: "send" | "x402";
  chain: string;
  token: TokenInfo;
  amount: bigint;
  from: string;
  /** Recipient address (and, for x402, also checked as a hostname). */
  to: string;
  /** Whitelist entries that also admit this spend (x402: the hostname). */
  alsoAllowedAs?: string[];
  /** USD value in micro-dollars; undefined when the token has no price. */
  usdMicros: bigint | undefined;
  /** Set only once the decision has been verified with the authorization daemon. */
  spendDecisionId?: string | undefined;
  /** x402: the URL of the resource paid for. */
  resource?: string;
}

/**
 * The rules that do not depend on other spends: paused, verified authorization when required, whitelist,
 * price known (when any USD bound is set), per-transaction bound. Throws PolicyViolation with api.md's reasons.
 */
export function checkStaticRules(policy: PolicyRow, spend: SpendFacts): void {
  if (policy.status === "paused") {
    throw errors.policyViolation("policy_paused", "Spending is paused for this wallet", { rule: "status" });
  }
  if (policy.requireSpendAuthorization && spend.spendDecisionId === undefined) {
    throw errors.policyViolation(
      "spend_authorization_required",
      "This wallet's policy requires a spend authorization: send spendAuthorization.decisionId with a decision approved by the authorization daemon",
      { rule: "requireSpendAuthorization" },
    );
  }
  if (policy.whitelist.length > 0) {
    const candidates = [spend.to, ...(spend.alsoAllowedAs ?? [])];
    const allowed = candidates.some((candidate) =>
      policy.whitelist.some((entry) => sameRecipient(entry, candidate)),
    );
    if (!allowed) {
      throw errors.policyViolation(
        "recipient_not_allowed",
        `Recipient ${spend.to} is not on this wallet's whitelist`,
        {
          rule: "whitelist",
          recipient: spend.to,
        },
      );
    }
  }
  // Every USD bound fails closed on a token without a price: a spend the policy cannot value is neither let
  // past a limit nor past an owner who asked to approve or hear of large spends.
  const bounded =
    policy.maxPerTxMicros !== null ||
    policy.dailyLimitMicros !== null ||
    policy.approvalAboveMicros !== null ||
    policy.alertAboveMicros !== null;
  if (bounded && spend.usdMicros === undefined) {
    throw errors.policyViolation(
      "price_unavailable",
      `No USD price is known for ${spend.token.symbol} on ${spend.chain}, so this spend cannot be checked against the policy's USD bounds`,
      { rule: "price", token: spend.token.symbol, chain: spend.chain },
    );
  }
  if (
    policy.maxPerTxMicros !== null &&
    spend.usdMicros !== undefined &&
    spend.usdMicros > policy.maxPerTxMicros
  ) {
    throw errors.policyViolation(
      "max_per_tx",
      `Per-transaction limit of $${formatUsd(policy.maxPerTxMicros)} exceeded: this spend is $${formatUsd(spend.usdMicros)}`,
      { rule: "maxPerTx", limit: formatUsd(policy.maxPerTxMicros), requested: formatUsd(spend.usdMicros) },
    );
  }
}

/**
 * Whether a spend waits for an admin's approval: its USD value is above the policy's `approvalAbove`. An x402
 * payment cannot wait (the resource's challenge expires): above the bound it is refused.
 */
export function needsApproval(policy: PolicyRow, spend: SpendFacts): boolean {
  const bound = policy.approvalAboveMicros;
  if (bound === null || spend.usdMicros === undefined || spend.usdMicros <= bound) return false;
  if (spend.type === "x402") {
    throw errors.policyViolation(
      "approval_required",
      `Payments above $${formatUsd(bound)} need an owner's approval, which an x402 payment cannot wait for: this one is $${formatUsd(spend.usdMicros)}`,
      { rule: "approvalAbove", limit: formatUsd(bound), requested: formatUsd(spend.usdMicros) },
    );
  }
  return true;
}

/** Whether a spend is above the policy's `alertAbove` (it proceeds; the owner is told). */
export function isAboveAlert(policy: PolicyRow, spend: SpendFacts): boolean {
  return (
    policy.alertAboveMicros !== null &&
    spend.usdMicros !== undefined &&
    spend.usdMicros > policy.alertAboveMicros
  );
}
