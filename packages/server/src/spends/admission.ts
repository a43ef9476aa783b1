import { and, asc, eq, gt, gte, inArray, lt, sql } from "drizzle-orm";
import type { SignedTransfer, TokenInfo } from "../chains/types.ts";
import { attachTransaction, type IdempotencyClaim } from "../idempotency/idempotency.ts";
import { evmNonces, spendHours, transactions, walletPolicies, wallets } from "../internal/db/schema.ts";
import type { Db } from "../internal/db/store.ts";
import { errors } from "../internal/errors.ts";
import { formatUsd } from "../internal/money.ts";
import { type PolicyRow, sameRecipient } from "../policy/policy.ts";
import { recordTransaction, type TransactionRow } from "../transactions/transactions.ts";

const DAY_MS = 24 * 60 * 60 * 1000;

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
}

/**
 * The rules that do not depend on other spends: paused, verified authorization when required, whitelist,
 * price known, per-transaction bound. Throws PolicyViolation with api.md's reasons.
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
  const bounded = policy.maxPerTxMicros !== null || policy.dailyLimitMicros !== null;
  if (bounded && spend.usdMicros === undefined) {
    throw errors.policyViolation(
      "price_unavailable",
      `No USD price is known for ${spend.token.symbol} on ${spend.chain}, so this spend cannot be checked against the policy's USD limits`,
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

const HOUR_MS = 60 * 60 * 1000;

/** The start of the hour bucket a moment falls in (UTC hours, as the migration's backfill counts them). */
const hourOf = (at: Date) => new Date(Math.floor(at.getTime() / HOUR_MS) * HOUR_MS);

/** Spends that hold a reservation: pending or confirmed sends and x402 payments. */
const holdsReservation = and(
  inArray(transactions.type, ["send", "x402"]),
  inArray(transactions.status, ["pending", "confirmed"]),
);

/**
 * USD spent in the rolling 24 h before `now`: whole hours from `spend_hours`, and the rows of the one
 * hour the window starts inside.
 */
async function windowUsage(db: Db, walletId: string, now: Date): Promise<bigint> {
  const windowStart = new Date(now.getTime() - DAY_MS);
  const firstWholeHour = new Date(Math.ceil(windowStart.getTime() / HOUR_MS) * HOUR_MS);
  const [[hours], [edge]] = await Promise.all([
    db
      .select({ used: sql<string>`coalesce(sum(${spendHours.usdMicros}), 0)` })
      .from(spendHours)
      .where(and(eq(spendHours.walletId, walletId), gte(spendHours.hour, firstWholeHour))),
    db
      .select({ used: sql<string>`coalesce(sum(${transactions.usdMicros}), 0)` })
      .from(transactions)
      .where(
        and(
          eq(transactions.walletId, walletId),
          holdsReservation,
          gt(transactions.createdAt, windowStart),
          lt(transactions.createdAt, firstWholeHour),
        ),
      ),
  ]);
  return BigInt(hours?.used ?? 0) + BigInt(edge?.used ?? 0);
}

/** When the oldest spend in the window leaves it: the earliest moment the limit has room again. */
async function windowResetsAt(db: Db, walletId: string, now: Date): Promise<Date> {
  const [oldest] = await db
    .select({ createdAt: transactions.createdAt })
    .from(transactions)
    .where(
      and(
        eq(transactions.walletId, walletId),
        holdsReservation,
        gt(transactions.createdAt, new Date(now.getTime() - DAY_MS)),
      ),
    )
    .orderBy(asc(transactions.createdAt))
    .limit(1);
  return new Date((oldest?.createdAt ?? now).getTime() + DAY_MS);
}

/** Adds (or, negative, gives back) a spend's USD to its hour bucket. */
async function addToHour(db: Db, walletId: string, at: Date, usdMicros: bigint): Promise<void> {
  await db
    .insert(spendHours)
    .values({ walletId, hour: hourOf(at), usdMicros })
    .onConflictDoUpdate({
      target: [spendHours.walletId, spendHours.hour],
      set: { usdMicros: sql`${spendHours.usdMicros} + ${usdMicros.toString()}::numeric` },
    });
}

/**
 * Refuses a spend that would take the rolling 24 h sum past `dailyLimit`. Inside {@link admitSpend} it runs
 * under the policy row's lock, which makes it exact; before that, without the lock, it only answers early.
 */
export async function checkDailyLimit(
  db: Db,
  policy: PolicyRow,
  spend: SpendFacts,
  now = new Date(),
): Promise<void> {
  if (policy.dailyLimitMicros !== null && spend.usdMicros !== undefined) {
    const used = await windowUsage(db, spend.walletId, now);
    if (used + spend.usdMicros > policy.dailyLimitMicros) {
      const remaining = policy.dailyLimitMicros > used ? policy.dailyLimitMicros - used : 0n;
      throw errors.policyViolation(
        "daily_limit",
        `Daily limit of $${formatUsd(policy.dailyLimitMicros)} exceeded: $${formatUsd(used)} used in the last 24h, this spend is $${formatUsd(spend.usdMicros)}`,
        {
          rule: "dailyLimit",
          limit: formatUsd(policy.dailyLimitMicros),
          used: formatUsd(used),
          requested: formatUsd(spend.usdMicros),
          remaining: formatUsd(remaining),
          resetsAt: (await windowResetsAt(db, spend.walletId, now)).toISOString(),
        },
      );
    }
  }
}

/**
 * The one atomic step of a spend: lock the wallet's policy row, check every rule against it and the
 * rolling window, hand out the EVM nonce, sign, and record the spend `pending` — all in one database
 * transaction. However many spends race, each sees the ones admitted before it, so the sum admitted never
 * passes the daily limit (on PGlite, on PostgreSQL, and across instances sharing one PostgreSQL).
 *
 * Nothing here waits on the network: the caller plans the transfer (fees, blockhash, the chain's pending
 * nonce) before, and `sign` signs locally with what was planned. It runs inside the transaction, receives the
 * nonce handed out (EVM), and must not broadcast.
 */
export async function admitSpend(
  db: Db,
  spend: SpendFacts,
  options: {
    evmNonce?: { chainPendingNonce: number };
    sign: (nonce: number | undefined) => Promise<SignedTransfer>;
    idempotency?: IdempotencyClaim | undefined;
    now?: Date;
  },
): Promise<TransactionRow> {
  return db.transaction(async (txDb) => {
    const tx = txDb as unknown as Db;
    const [policy] = await tx
      .select()
      .from(walletPolicies)
      .where(eq(walletPolicies.walletId, spend.walletId))
      .for("update");
    if (!policy) throw new Error(`wallet ${spend.walletId} has no policy row`);
    // Archiving also takes this lock (archiveWallet), so a spend and an archive cannot interleave.
    const [wallet] = await tx
      .select({ status: wallets.status })
      .from(wallets)
      .where(eq(wallets.id, spend.walletId));
    if (wallet?.status !== "active") throw errors.walletArchived(spend.walletId);
    checkStaticRules(policy, spend);
    const now = options.now ?? new Date();
    await checkDailyLimit(tx, policy, spend, now);
    let nonce: number | undefined;
    if (options.evmNonce) {
      // max(what we handed out, what the chain has seen), then move past it: consecutive, never reused.
      const [allocated] = await tx
        .insert(evmNonces)
        .values({
          chain: spend.chain,
          address: spend.from,
          nextNonce: options.evmNonce.chainPendingNonce + 1,
        })
        .onConflictDoUpdate({
          target: [evmNonces.chain, evmNonces.address],
          set: {
            nextNonce: sql`greatest(${evmNonces.nextNonce}, ${options.evmNonce.chainPendingNonce}) + 1`,
          },
        })
        .returning({ next: evmNonces.nextNonce });
      if (!allocated) throw new Error("nonce allocation returned no row");
      nonce = allocated.next - 1;
    }
    const signed = await options.sign(nonce);
    const row = await recordTransaction(tx, {
      walletId: spend.walletId,
      type: spend.type,
      chain: spend.chain,
      token: spend.token.symbol,
      amountAtomic: spend.amount,
      decimals: spend.token.decimals,
      fromAddress: spend.from,
      toAddress: spend.to,
      txHash: signed.txHash,
      status: "pending",
      spendDecisionId: spend.spendDecisionId ?? null,
      usdMicros: spend.usdMicros ?? null,
      rawTx: signed.raw,
      nonce: signed.nonce ?? null,
      lastValidBlockHeight: signed.lastValidBlockHeight ?? null,
      createdAt: now,
    });
    if (spend.usdMicros !== undefined && spend.usdMicros > 0n)
      await addToHour(tx, spend.walletId, now, spend.usdMicros);
    if (options.idempotency) await attachTransaction(tx, options.idempotency, row.id);
    return row;
  });
}

/**
 * Gives back a nonce whose transaction never reached the chain, when no later nonce was handed out since.
 * Returns false when a later one was: the caller must then fill the gap on chain.
 */
export async function releaseNonce(db: Db, chain: string, address: string, nonce: number): Promise<boolean> {
  const released = await db
    .update(evmNonces)
    .set({ nextNonce: nonce })
    .where(
      and(eq(evmNonces.chain, chain), eq(evmNonces.address, address), eq(evmNonces.nextNonce, nonce + 1)),
    )
    .returning({ next: evmNonces.nextNonce });
  return released.length > 0;
}

/**
 * Marks a pending spend failed and gives its USD back to the rolling window, in one transaction. Returns
 * false when the spend was no longer pending (another caller settled it first).
 */
export async function failSpend(db: Db, transactionId: string, reason: string): Promise<boolean> {
  return db.transaction(async (txDb) => {
    const tx = txDb as unknown as Db;
    const [failed] = await tx
      .update(transactions)
      .set({ status: "failed", failureReason: reason })
      .where(and(eq(transactions.id, transactionId), eq(transactions.status, "pending")))
      .returning();
    if (failed?.usdMicros && failed.usdMicros > 0n && (failed.type === "send" || failed.type === "x402")) {
      await addToHour(tx, failed.walletId, failed.createdAt, -failed.usdMicros);
    }
    return failed !== undefined;
  });
}
