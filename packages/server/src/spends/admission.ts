import { and, eq } from "drizzle-orm";
import { ensureAccessTokenLive } from "../accounts/accounts.ts";
import { ensureApiKeyLive } from "../api-keys/api-keys.ts";
import type { SignedTransfer } from "../chains/types.ts";
import { recordEvent } from "../events/events.ts";
import { attachTransaction, type IdempotencyClaim } from "../idempotency/idempotency.ts";
import { evmNonces, transactions, walletPolicies, wallets } from "../internal/db/schema.ts";
import { type Db, namedStatement, type Tx, tableColumns, withDomainErrors } from "../internal/db/store.ts";
import { errors } from "../internal/errors.ts";
import { formatUsd } from "../internal/money.ts";
import type { PolicyRow } from "../policy/policy.ts";
import { checkStaticRules, isAboveAlert, needsApproval, type SpendFacts } from "../policy/rules.ts";
import { addToHour, checkDailyLimit } from "../policy/spend-window.ts";
import {
  feeColumns,
  recordTransaction,
  type SpendFee,
  type TransactionRow,
  toTransactionView,
} from "../transactions/transactions.ts";
import { alreadyUsed } from "./authorization.ts";
import { checkFundsInFlight, type FundedPlan, type FundsRead, fundsReadOf } from "./funds.ts";
import { allocateNonceSql, releaseNonce } from "./nonces.ts";

/**
 * What signing a spend produced: a transfer for this service to broadcast, or (x402) a payment that the
 * resource's facilitator will submit, identified on chain by `x402Payment` until a receipt names its hash.
 */
export type SignedSpend = SignedTransfer | { x402Payment: Record<string, unknown>; x402PaymentKey: string };

/** How long a spend held for approval waits before it expires (`SVC_APPROVAL_TTL_SECONDS`). */
export const DEFAULT_APPROVAL_TTL_MS = 3_600_000;

/**
 * The columns a signed spend fills: what rebroadcasting a transfer, or reconciling an x402 payment, needs.
 * A transfer is broadcast as soon as it is recorded, so it is recorded as broadcast now (no second write).
 */
export function signedColumns(spend: Pick<SpendFacts, "resource">, signed: SignedSpend | undefined) {
  if (signed === undefined) return {};
  if ("x402Payment" in signed)
    return {
      resource: spend.resource ?? null,
      x402Payment: signed.x402Payment,
      x402PaymentKey: signed.x402PaymentKey,
    };
  return {
    txHash: signed.txHash,
    rawTx: signed.raw,
    nonce: signed.nonce ?? null,
    lastValidBlockHeight: signed.lastValidBlockHeight ?? null,
    broadcastAt: new Date(),
  };
}

/** How often a transfer signed alike by another instance is signed again before the spend is refused. */
const SIGNINGS_PER_SPEND = 3;

/**
 * Signs (admitting a spend, or approving a held one), and signs again while what it signed is a transaction
 * already recorded. A Solana transfer has no
 * nonce: two alike in every field and signed against one blockhash are one transaction, which lands once
 * while both records would claim it. Each process signs each of its transfers differently, but another
 * instance on the same store may have signed this very one first; the wallet's lock, held here, orders the
 * two. An EVM transfer is unique by the nonce the lock handed out, and needs no look.
 */
export async function signedAnew(
  tx: Tx,
  chain: string,
  sign: () => Promise<SignedSpend>,
): Promise<SignedSpend> {
  for (let signing = 1; ; signing++) {
    const signed = await sign();
    if (!("txHash" in signed) || signed.nonce !== undefined) return signed;
    const [taken] = await tx
      .select({ id: transactions.id })
      .from(transactions)
      .where(and(eq(transactions.chain, chain), eq(transactions.txHash, signed.txHash)))
      .limit(1);
    if (!taken) return signed;
    if (signing === SIGNINGS_PER_SPEND)
      throw new Error(`signed ${SIGNINGS_PER_SPEND} times a transaction already recorded (${taken.id})`);
  }
}

/** The credential a spend was asked with: an API key, or an owner's login access token. */
export type AskingCredential =
  | { kind: "api_key"; keyId: string }
  | { kind: "access_token"; accountId: string; tokenId: string; expiresAt: Date };

/**
 * Holds the credential that asked for a spend live until the spend's transaction ends: a key revoked (or
 * expired), or a login ended (or expired), since its request was authenticated refuses the spend (401, as
 * its next request would be); a revocation or logout that comes after waits for the transaction, so what
 * the credential spent was decided before the revocation or logout answered.
 */
export async function holdAskingCredential(
  tx: Tx,
  credential: AskingCredential | undefined,
  now: Date,
): Promise<void> {
  if (credential?.kind === "api_key") await ensureApiKeyLive(tx, credential.keyId, now, { hold: true });
  else if (credential?.kind === "access_token")
    await ensureAccessTokenLive(tx, credential, now, { hold: true });
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
    /**
     * A transfer's plan: on EVM the lock hands out its nonce; its funds are checked against the spends in
     * flight ({@link checkFundsInFlight}).
     */
    plan?: FundedPlan;
    /** An x402 payment's funds (EVM or Solana), read before: checked against the spends in flight. */
    paymentFunds?: FundsRead | undefined;
    sign: (nonce: number | undefined) => Promise<SignedSpend>;
    idempotency?: IdempotencyClaim | undefined;
    /** The credential that asks: it must still be live when admitted. */
    credential?: AskingCredential | undefined;
    now?: Date;
    /** How long a spend above `approvalAbove` waits for a decision; default {@link DEFAULT_APPROVAL_TTL_MS}. */
    approvalTtlMs?: number;
  },
): Promise<TransactionRow> {
  // Two spends raced with one decision: the unique index let the first in, and that spend holds it.
  return withDomainErrors(() => admitLocked(db, spend, options), {
    transactions_spend_decision_key: () => alreadyUsed(spend.spendDecisionId ?? ""),
    // An x402 payment signed alike by another instance at the same moment: one of them is recorded.
    transactions_x402_payment_key: () => errors.paymentNotUnique(),
  });
}

async function admitLocked(
  db: Db,
  spend: SpendFacts,
  options: Parameters<typeof admitSpend>[2],
): Promise<TransactionRow> {
  return db.transaction(async (tx) => {
    const evm = options.plan?.evm;
    const { policy, admissionSeq, nonce } = await lockSpendingPolicy(
      tx,
      spend.walletId,
      evm && { chain: spend.chain, address: spend.from, chainPendingNonce: evm.pendingNonce },
    );
    const now = options.now ?? new Date();
    await holdAskingCredential(tx, options.credential, now);
    checkStaticRules(policy, spend);
    await checkDailyLimit(tx, policy, spend, now);
    // Above approvalAbove: recorded and reserved, but neither given a nonce nor signed until an admin approves.
    const held = needsApproval(policy, spend);
    let signed: SignedSpend | undefined;
    if (held) {
      // The lock handed one out with it: given back (nothing else of this address can have taken a later one
      // under the lock), so the next spend signs with it.
      if (nonce !== undefined && !(await releaseNonce(tx, spend.chain, spend.from, nonce)))
        throw new Error("a nonce handed out under the spend's lock could not be given back");
    } else {
      const funds = options.plan ? fundsReadOf(options.plan) : options.paymentFunds;
      if (funds) await checkFundsInFlight(tx, spend, funds, nonce);
      signed = await signedAnew(tx, spend.chain, () => options.sign(nonce));
    }
    const row = await recordTransaction(
      tx,
      {
        walletId: spend.walletId,
        type: spend.type,
        chain: spend.chain,
        token: spend.token.symbol,
        amountAtomic: spend.amount,
        decimals: spend.token.decimals,
        fromAddress: spend.from,
        toAddress: spend.to,
        status: held ? "pending_approval" : "pending",
        // A held spend is admitted when approved, and numbered then.
        admissionSeq: held ? null : admissionSeq,
        spendDecisionId: spend.spendDecisionId ?? null,
        requestedByKeyId: options.credential?.kind === "api_key" ? options.credential.keyId : null,
        usdMicros: spend.usdMicros ?? null,
        ...signedColumns(spend, signed),
        ...(held
          ? {
              approvalStatus: "pending" as const,
              approvalExpiresAt: new Date(now.getTime() + (options.approvalTtlMs ?? DEFAULT_APPROVAL_TTL_MS)),
            }
          : {}),
        createdAt: now,
      },
      {
        events: (view) => [
          ...(held ? [{ type: "approval.requested" as const, data: view }] : []),
          ...(isAboveAlert(policy, spend)
            ? [
                {
                  type: "spend.alert" as const,
                  data: {
                    alertAbove: formatUsd(policy.alertAboveMicros ?? 0n),
                    usdValue: formatUsd(spend.usdMicros ?? 0n),
                    transaction: view,
                  },
                },
              ]
            : []),
        ],
        reservedUsdMicros: spend.usdMicros ?? 0n,
      },
    );
    if (options.idempotency) await attachTransaction(tx, options.idempotency, row.id);
    return row;
  });
}

/**
 * Locks a wallet's policy row for a spend and refuses an archived wallet, in one statement. The lock is NO
 * KEY UPDATE, which conflicts with itself (other spends) and with the FOR UPDATE that archiving and policy
 * changes take on the same row, so none of them interleave. The wallet row is locked with it (NO KEY UPDATE
 * does not hold up rows that merely reference the wallet) so that, when the statement has waited for an
 * archive to commit, PostgreSQL re-reads both rows and the status read is the archived one.
 *
 * With `nonceFor` (an EVM transfer), the same statement also hands out the sender's next nonce (see
 * nonces.ts), from the locked row, so only once the lock is held; a refusal after it rolls the nonce back
 * with the rest of the transaction.
 *
 * It also hands out, once the lock is held, the spend's `admissionSeq`: the spends of a wallet admitted
 * later have higher ones, whichever instance admitted them and whatever its clock reads (the funds check
 * counts by it those admitted after its balances were read). One refused wastes its number, as a sequence
 * does.
 */
export async function lockSpendingPolicy(
  tx: Tx,
  walletId: string,
  nonceFor?: { chain: string; address: string; chainPendingNonce: number },
): Promise<{ policy: PolicyRow; admissionSeq: bigint; nonce?: number }> {
  const [locked] = nonceFor
    ? await lockWithNonceStatement(tx, [
        walletId,
        nonceFor.chain,
        nonceFor.address,
        nonceFor.chainPendingNonce,
      ])
    : await lockStatement(tx, [walletId]);
  if (!locked) throw new Error(`wallet ${walletId} has no policy row`);
  if (locked.walletStatus !== "active") throw errors.walletArchived(walletId);
  const { policy, admissionSeq } = locked;
  if (!nonceFor) return { policy, admissionSeq };
  if (locked.nextNonce === null) throw new Error("the spend's lock handed out no nonce");
  return { policy, admissionSeq, nonce: locked.nextNonce - 1 };
}

type LockedPolicy = {
  policy: PolicyRow;
  walletStatus: string;
  admissionSeq: bigint;
  nextNonce: number | null;
};
const policyColumns = tableColumns(walletPolicies, ["policy"], "p");
const lockedPolicySql = `SELECT ${policyColumns.list}, w.status AS wallet_status
  FROM wallet_policies p JOIN wallets w ON w.id = p.wallet_id
  WHERE p.wallet_id = $1 FOR NO KEY UPDATE OF p, w`;
// Evaluated on the rows the materialized CTE gives, each given once locked.
const admissionSeqSql = "nextval('transactions_admission_seq')";
const lockedFields = [
  ...policyColumns.fields,
  [["walletStatus"], wallets.status],
  [["admissionSeq"], transactions.admissionSeq],
] as const;
const lockStatement = namedStatement<LockedPolicy>(
  "lock_spending_policy",
  `WITH locked AS MATERIALIZED (${lockedPolicySql}) SELECT locked.*, ${admissionSeqSql} FROM locked`,
  lockedFields,
);
const lockWithNonceStatement = namedStatement<LockedPolicy>(
  "lock_spending_policy_with_nonce",
  `WITH locked AS MATERIALIZED (${lockedPolicySql}),
    allocated AS (${allocateNonceSql("locked WHERE locked.wallet_status = 'active'", 2)})
  SELECT locked.*, ${admissionSeqSql}, (SELECT next_nonce FROM allocated) FROM locked`,
  [...lockedFields, [["nextNonce"], evmNonces.nextNonce]],
);

/**
 * Marks a pending spend failed and gives its USD back to the rolling window, in one transaction; `fee`, what
 * it paid when it landed and failed on chain. Returns false when the spend was no longer pending (another
 * caller settled it first).
 */
export async function failSpend(
  db: Db,
  transactionId: string,
  reason: string,
  fee?: SpendFee,
): Promise<boolean> {
  return db.transaction(async (tx) => {
    const [failed] = await tx
      .update(transactions)
      .set({ status: "failed", failureReason: reason, ...(fee ? feeColumns(fee) : {}) })
      .where(and(eq(transactions.id, transactionId), eq(transactions.status, "pending")))
      .returning();
    if (!failed) return false;
    await releaseReservation(tx, failed);
    await recordEvent(tx, { walletId: failed.walletId }, "transaction.failed", toTransactionView(failed));
    return true;
  });
}

/** Gives a spend's USD back to the rolling window (it failed, or its approval was refused). */
export async function releaseReservation(tx: Tx, spend: TransactionRow): Promise<void> {
  if (spend.usdMicros && spend.usdMicros > 0n && (spend.type === "send" || spend.type === "x402"))
    await addToHour(tx, spend.walletId, spend.createdAt, -spend.usdMicros);
}

/**
 * Moves a spend's reservation in the rolling window to `at`, at `usdMicros`: a held spend approved is sent
 * then, counted as it is sent, and counts from then. The caller dates the spend `at` and sets its USD in the
 * same transaction (the window reads rows by their date).
 */
export async function moveReservation(
  tx: Tx,
  spend: TransactionRow,
  at: Date,
  usdMicros: bigint | undefined,
): Promise<void> {
  if (spend.usdMicros && spend.usdMicros > 0n)
    await addToHour(tx, spend.walletId, spend.createdAt, -spend.usdMicros);
  if (usdMicros && usdMicros > 0n) await addToHour(tx, spend.walletId, at, usdMicros);
}
