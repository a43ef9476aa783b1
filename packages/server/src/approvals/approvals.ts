/**
 * Spends held for an owner's approval (policy `approvalAbove`). Such a spend is recorded `pending_approval`,
 * reserved against the daily limit and unsigned; an approval's id is its transaction's id. Approving signs
 * and sends it through the same pipeline as any send, the policy checked again at that moment; rejecting,
 * or letting it expire, ends it `rejected` and gives its reservation back.
 */
import { and, asc, desc, eq, inArray, lte } from "drizzle-orm";
import type { AuthzdClient } from "../authzd/client.ts";
import { type EventType, recordEvent } from "../events/events.ts";
import { attachTransaction, type IdempotencyClaim } from "../idempotency/idempotency.ts";
import { transactions, wallets } from "../internal/db/schema.ts";
import type { Db, Tx } from "../internal/db/store.ts";
import { AppError, errors } from "../internal/errors.ts";
import { usdMicros } from "../policy/pricing.ts";
import { checkStaticRules, type SpendFacts, withRecipientAccountRent } from "../policy/rules.ts";
import { checkDailyLimit, reservedInWindow } from "../policy/spend-window.ts";
import {
  holdAskingCredential,
  lockSpendingPolicy,
  moveReservation,
  releaseReservation,
  signedAnew,
  signedColumns,
} from "../spends/admission.ts";
import { checkCreditsCoverSpend, decisionForgotten } from "../spends/authorization.ts";
import { broadcastRecorded } from "../spends/broadcast.ts";
import { checkFundsInFlight, fundsReadOf } from "../spends/funds.ts";
import type { SpendAsker, SpendDeps } from "../spends/send.ts";
import { checkRecipient, findToken, planFundedTransfer } from "../spends/transfer.ts";
import {
  findTransactionForAccount,
  type TransactionRow,
  toTransactionView,
} from "../transactions/transactions.ts";
import { findWalletForAccount, openSigningKey } from "../wallets/wallets.ts";

/** What ending a held spend needs: the store, the daemon its decision goes back to, and the clock. */
export interface DecisionDeps {
  db: Db;
  authzd?: AuthzdClient | undefined;
  now?: () => Date;
}

export type ApprovalStatus = NonNullable<TransactionRow["approvalStatus"]>;
export const APPROVAL_STATUSES = [
  "pending",
  "approved",
  "rejected",
  "expired",
] as const satisfies readonly ApprovalStatus[];

/** A held spend of the account, by its id; NotFound when the account has no such spend waiting or decided. */
async function findApproval(db: Db, accountId: string, transactionId: string): Promise<TransactionRow> {
  const row = await findTransactionForAccount(db, accountId, transactionId).catch((error: unknown) => {
    if (error instanceof AppError && error.status === 404) return undefined;
    throw error;
  });
  if (!row?.approvalStatus) throw errors.approvalNotFound(transactionId);
  return row;
}

/**
 * Refuses (403 `spend_authorization_mismatch`, the spend left waiting) the approval of a held spend whose
 * decision's credits no longer cover it as it would now be sent: its recipient closed the token account it
 * held, so the send would open one and give it the rent. The decision was consumed when the spend was asked,
 * and stays so. One the daemon has forgotten (a spend held past the daemon's budget window) is refused too
 * (403 `spend_authorization_invalid`).
 */
async function checkDecisionStillCovers(
  deps: SpendDeps,
  decisionId: string,
  counted: SpendFacts,
): Promise<void> {
  if (!deps.authzd) throw errors.authzdNotConfigured();
  const decision = await deps.authzd.getDecision(decisionId);
  if (!decision) throw decisionForgotten(decisionId);
  checkCreditsCoverSpend(decision, counted);
}

/**
 * Approves a held spend: plans it (the network part, before any lock), then under the wallet's policy lock
 * checks the policy again, hands out the nonce, signs and marks it `pending`, and broadcasts it after the
 * commit. However many approvals race, one signs: the others find it decided (409 `already_decided`). A
 * refusal by the policy (403) or by the chain's balances (422) leaves it waiting; one past its deadline is
 * ended expired (409 `already_decided`), whether or not the confirmer has come by.
 */
export async function approveSpend(
  deps: SpendDeps,
  accountId: string,
  transactionId: string,
  asker: SpendAsker = {},
): Promise<TransactionRow> {
  const held = await findApproval(deps.db, accountId, transactionId);
  if (held.status !== "pending_approval")
    throw errors.alreadyDecided(held.id, held.approvalStatus ?? "", endedWhy(held));
  const asked = deps.now?.() ?? new Date();
  // The confirmer has not come by to end it yet.
  if (isPastDeadline(held, asked)) return refuseExpired(deps, held.id, asked);
  const wallet = await findWalletForAccount(deps.db, accountId, held.walletId);
  // Refused before any chain read, as a send is (the lock checks it again): an archived wallet spends nothing.
  if (wallet.status !== "active") throw errors.walletArchived(wallet.id);
  const client = deps.chainClient(held.chain);
  if (!client) throw errors.chainNotInWallet(held.chain, wallet.chains);
  const token = findToken(client, held.token);
  checkRecipient(client, held.toAddress);
  const spend: SpendFacts = {
    walletId: held.walletId,
    type: "send",
    chain: held.chain,
    token,
    amount: held.amountAtomic,
    from: held.fromAddress,
    to: held.toAddress,
    usdMicros: held.usdMicros ?? undefined,
    spendDecisionId: held.spendDecisionId ?? undefined,
  };
  const plan = await planFundedTransfer(deps.db, client, spend.walletId, {
    from: spend.from,
    to: spend.to,
    token,
    amount: spend.amount,
  });
  // Counted as it is sent: the rent of a token account it opens for its recipient may have come or gone
  // since it was held (the recipient closed its account, or opened it).
  const counted = withRecipientAccountRent(
    { ...spend, usdMicros: usdMicros(token, spend.amount) },
    client.config.nativeToken,
    plan.recipientAccountRent,
  );
  // Its decision's credits were checked against the spend as it was asked; the rent may have come since.
  if (held.spendDecisionId) await checkDecisionStillCovers(deps, held.spendDecisionId, counted);
  const privateKey = await openSigningKey(deps.db, deps.keyring, wallet, client.config.kind);
  let approved: TransactionRow;
  try {
    approved = await deps.db.transaction(async (tx) => {
      const { policy, admissionSeq, nonce } = await lockSpendingPolicy(
        tx,
        held.walletId,
        plan.evm && { chain: spend.chain, address: spend.from, chainPendingNonce: plan.evm.pendingNonce },
      );
      const now = deps.now?.() ?? new Date();
      // The credential before the held row, in the order a revocation takes them (its key, then the spends
      // that key holds), so an admin key approving its own held spend while being revoked cannot deadlock.
      await holdAskingCredential(tx, asker.credential, now);
      const current = await lockHeld(tx, held.id);
      // Its deadline went by while it was planned: nothing of this transaction stays (the nonce included).
      if (isPastDeadline(current, now)) throw new DeadlinePassed(now);
      checkStaticRules(policy, counted);
      await checkDailyLimit(tx, policy, counted, now, reservedInWindow(current, now));
      const funds = fundsReadOf(plan);
      if (funds) await checkFundsInFlight(tx, spend, funds, nonce);
      const signed = await signedAnew(tx, spend.chain, () => client.signTransfer(plan, privateKey, nonce));
      // Sent now, so dated now: the daily limit counts it from its approval, not from when it was asked.
      await moveReservation(tx, current, now, counted.usdMicros);
      const row = await decide(
        tx,
        held.id,
        "approved",
        {
          status: "pending",
          createdAt: now,
          admissionSeq,
          usdMicros: counted.usdMicros ?? null,
          ...signedColumns(spend, signed),
        },
        now,
      );
      if (asker.idempotency) await attachTransaction(tx, asker.idempotency, row.id);
      return row;
    });
  } catch (error) {
    if (error instanceof DeadlinePassed) return refuseExpired(deps, held.id, error.at);
    throw error;
  } finally {
    privateKey.fill(0);
  }
  await broadcastRecorded(deps, client, approved);
  return approved;
}

/** Rolls back an approval's transaction that found the spend's deadline gone by under the lock. */
class DeadlinePassed extends Error {
  constructor(readonly at: Date) {
    super("the approval deadline went by");
  }
}

/**
 * Ends a held spend found past its deadline, as the confirmer would, and refuses its approval: 409
 * `already_decided` (expired), or with the decision that ended it meanwhile.
 */
async function refuseExpired(deps: DecisionDeps, transactionId: string, now: Date): Promise<never> {
  await expireHeld(deps, transactionId, now);
  throw errors.alreadyDecided(transactionId, "expired");
}

/**
 * Rejects a held spend: `rejected` with failureReason `approval_rejected`, its reservation given back. One
 * past its deadline was decided by it: ended expired, 409 `already_decided`, as an approval is.
 */
export async function rejectSpend(
  deps: DecisionDeps,
  accountId: string,
  transactionId: string,
  idempotency?: IdempotencyClaim,
): Promise<TransactionRow> {
  const held = await findApproval(deps.db, accountId, transactionId);
  const ended = await deps.db.transaction(async (tx) => {
    const current = await lockHeld(tx, held.id);
    const now = deps.now?.() ?? new Date();
    if (isPastDeadline(current, now)) return endUnsent(tx, held.id, "expired", now);
    const row = await endUnsent(tx, held.id, "rejected", now);
    if (idempotency) await attachTransaction(tx, idempotency, row.id);
    return row;
  });
  await giveBackAuthorization(deps, ended);
  if (ended.approvalStatus === "expired") throw errors.alreadyDecided(ended.id, "expired");
  return ended;
}

/**
 * Ends every held spend whose deadline has passed: `rejected` with failureReason `approval_expired`, its
 * reservation given back. Returns how many it ended.
 */
export async function expireApprovals(deps: DecisionDeps, limit = 100): Promise<number> {
  const now = deps.now?.() ?? new Date();
  const due = await deps.db
    .select({ id: transactions.id })
    .from(transactions)
    .where(and(eq(transactions.status, "pending_approval"), lte(transactions.approvalExpiresAt, now)))
    .orderBy(asc(transactions.approvalExpiresAt))
    .limit(limit);
  let ended = 0;
  for (const { id } of due) {
    // Each on its own: an approval decided meanwhile is simply skipped.
    const expired = await expireHeld(deps, id, now).then(
      () => true,
      () => false,
    );
    if (expired) ended++;
  }
  return ended;
}

/**
 * Ends, within the caller's transaction, every spend that the API key asked for and that still waits for
 * approval: `rejected` with failureReason `requester_revoked` (`approval_expired` once past its deadline),
 * its reservation given back. The caller revokes the key in the same transaction, and gives the rows'
 * authorizations back after the commit ({@link giveBackAuthorization}).
 *
 * Reservations are given back by wallet, then oldest hour first: the order in which every other writer
 * takes a wallet's hourly rows (an approval moves one from its hour to the current one), so two
 * revocations, or a revocation and an approval, cannot deadlock on them.
 */
export async function endSpendsHeldFor(tx: Tx, keyId: string, now: Date): Promise<TransactionRow[]> {
  const held = await tx
    .select()
    .from(transactions)
    .where(and(eq(transactions.requestedByKeyId, keyId), eq(transactions.status, "pending_approval")))
    .orderBy(asc(transactions.walletId), asc(transactions.createdAt), asc(transactions.id))
    .for("update");
  const ended: TransactionRow[] = [];
  for (const row of held) {
    ended.push(await endUnsent(tx, row.id, isPastDeadline(row, now) ? "expired" : "revoked", now));
  }
  return ended;
}

/** Why a held spend ended unsent (`requester_revoked`, say); null for one that was approved. */
function endedWhy(row: TransactionRow): string | null {
  return row.status === "rejected" ? row.failureReason : null;
}

/** Whether a held spend's deadline has passed at `now`. */
function isPastDeadline(held: TransactionRow, now: Date): boolean {
  return held.approvalExpiresAt !== null && held.approvalExpiresAt <= now;
}

/**
 * Ends a held spend as expired, its reservation and its agent's authorization given back; 409
 * `already_decided` when it was decided meanwhile.
 */
async function expireHeld(deps: DecisionDeps, transactionId: string, now: Date): Promise<void> {
  const expired = await deps.db.transaction(async (tx) => {
    await lockHeld(tx, transactionId);
    return endUnsent(tx, transactionId, "expired", now);
  });
  await giveBackAuthorization(deps, expired);
}

/** The account's held spends in one approval state, oldest first while waiting, newest first once decided. */
export async function listApprovals(
  db: Db,
  accountId: string,
  filter: { status: ApprovalStatus; walletIds?: readonly string[] | undefined },
  limit: number,
): Promise<TransactionRow[]> {
  if (filter.walletIds?.length === 0) return [];
  const rows = await db
    .select({ transaction: transactions })
    .from(transactions)
    .innerJoin(wallets, eq(wallets.id, transactions.walletId))
    .where(
      and(
        eq(wallets.accountId, accountId),
        eq(transactions.approvalStatus, filter.status),
        filter.walletIds ? inArray(transactions.walletId, [...filter.walletIds]) : undefined,
      ),
    )
    .orderBy(filter.status === "pending" ? asc(transactions.createdAt) : desc(transactions.createdAt))
    .limit(limit);
  return rows.map((row) => row.transaction);
}

/** Locks a held spend's row and refuses one already decided. */
async function lockHeld(tx: Tx, transactionId: string): Promise<TransactionRow> {
  const [row] = await tx.select().from(transactions).where(eq(transactions.id, transactionId)).for("update");
  if (!row) throw errors.approvalNotFound(transactionId);
  if (row.status !== "pending_approval")
    throw errors.alreadyDecided(row.id, row.approvalStatus ?? "", endedWhy(row));
  return row;
}

/** Why a held spend ended unsent, as its `failureReason` says. */
const UNSENT_REASONS = {
  rejected: "approval_rejected",
  expired: "approval_expired",
  revoked: "requester_revoked",
} as const;

/**
 * Ends a held spend that was never signed, releasing what it reserved. Its approval is `expired` past its
 * deadline and `rejected` otherwise, an admin's rejection and its asking key's revocation alike.
 */
async function endUnsent(
  tx: Tx,
  transactionId: string,
  why: keyof typeof UNSENT_REASONS,
  now: Date,
): Promise<TransactionRow> {
  const row = await decide(
    tx,
    transactionId,
    why === "expired" ? "expired" : "rejected",
    { status: "rejected", failureReason: UNSENT_REASONS[why] },
    now,
  );
  await releaseReservation(tx, row);
  return row;
}

const DECISION_EVENTS: Record<Exclude<ApprovalStatus, "pending">, EventType> = {
  approved: "approval.approved",
  rejected: "approval.rejected",
  expired: "approval.expired",
};

/** Records a decision on a locked, still waiting spend, with its event. */
async function decide(
  tx: Tx,
  transactionId: string,
  outcome: Exclude<ApprovalStatus, "pending">,
  set: Partial<typeof transactions.$inferInsert>,
  now: Date,
): Promise<TransactionRow> {
  const [row] = await tx
    .update(transactions)
    .set({ ...set, approvalStatus: outcome, approvalDecidedAt: now })
    .where(and(eq(transactions.id, transactionId), eq(transactions.status, "pending_approval")))
    .returning();
  if (!row) throw errors.alreadyDecided(transactionId, outcome);
  await recordEvent(tx, { walletId: row.walletId }, DECISION_EVENTS[outcome], toTransactionView(row));
  return row;
}

/** A spend that was never sent gives its authorization back to the agent (best effort, after the commit). */
export async function giveBackAuthorization(deps: DecisionDeps, row: TransactionRow): Promise<void> {
  if (row.spendDecisionId && deps.authzd)
    await deps.authzd.releaseDecision(row.spendDecisionId).catch(() => {});
}
