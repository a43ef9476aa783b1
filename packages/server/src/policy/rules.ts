import type { TokenInfo } from "../chains/types.ts";
import { errors } from "../internal/errors.ts";
import { formatUsd } from "../internal/money.ts";
import { type PolicyRow, sameRecipient } from "./policy.ts";
import { usdMicros } from "./pricing.ts";

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
  /**
   * USD value in micro-dollars, what the policy counts: the amount's, and the rent it gives the recipient
   * (`recipientAccountRent`) with it; undefined when either has no price.
   */
  usdMicros: bigint | undefined;
  /**
   * Solana: the rent of the token account the transfer opens for its recipient, paid by the wallet in SOL.
   * The recipient can close the account and take the rent, so the policy counts it as given, as the amount
   * is: without it a dust send to a fresh address moved about $0.30 past a $0.01 limit each time.
   */
  recipientAccountRent?: { token: TokenInfo; amount: bigint; usdMicros: bigint | undefined };
  /** Set only once the decision has been verified with the authorization daemon. */
  spendDecisionId?: string | undefined;
  /** x402: the URL of the resource paid for. */
  resource?: string;
}

/**
 * `spend` as the policy counts it once its plan is known: with the rent of the token account it opens for
 * its recipient, if it opens one (`rent`, in atomic units of `native`).
 */
export function withRecipientAccountRent(
  spend: SpendFacts,
  native: TokenInfo,
  rent: bigint | undefined,
): SpendFacts {
  if (!rent) return spend;
  const rentMicros = usdMicros(native, rent);
  return {
    ...spend,
    usdMicros:
      spend.usdMicros === undefined || rentMicros === undefined ? undefined : spend.usdMicros + rentMicros,
    recipientAccountRent: { token: native, amount: rent, usdMicros: rentMicros },
  };
}

/** The token whose missing price leaves a spend without a USD value: the rent's (native) or the amount's. */
export function unpricedToken(spend: SpendFacts): TokenInfo {
  const rent = spend.recipientAccountRent;
  return rent && rent.usdMicros === undefined ? rent.token : spend.token;
}

/** A spend's USD as refusals state it, naming the rent it gives its recipient when there is any. */
export function spendUsdText(spend: SpendFacts): string {
  const rent = spend.recipientAccountRent?.usdMicros;
  return `$${formatUsd(spend.usdMicros ?? 0n)}${rent ? `, of which $${formatUsd(rent)} is the rent of the recipient's new token account` : ""}`;
}

/** The rent a spend gives its recipient, for a refusal's details; empty when there is none. */
export function rentDetails(spend: SpendFacts): { recipientAccountRent?: string } {
  const rent = spend.recipientAccountRent?.usdMicros;
  return rent ? { recipientAccountRent: formatUsd(rent) } : {};
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
    const unpriced = unpricedToken(spend);
    throw errors.policyViolation(
      "price_unavailable",
      `No USD price is known for ${unpriced.symbol} on ${spend.chain}${unpriced === spend.token ? "" : " (this send pays in it the rent of the recipient's new token account)"}, so this spend cannot be checked against the policy's USD bounds`,
      { rule: "price", token: unpriced.symbol, chain: spend.chain },
    );
  }
  if (
    policy.maxPerTxMicros !== null &&
    spend.usdMicros !== undefined &&
    spend.usdMicros > policy.maxPerTxMicros
  ) {
    throw errors.policyViolation(
      "max_per_tx",
      `Per-transaction limit of $${formatUsd(policy.maxPerTxMicros)} exceeded: this spend is ${spendUsdText(spend)}`,
      {
        rule: "maxPerTx",
        limit: formatUsd(policy.maxPerTxMicros),
        requested: formatUsd(spend.usdMicros),
        ...rentDetails(spend),
      },
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
