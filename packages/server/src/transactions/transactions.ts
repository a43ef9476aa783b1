import { and, desc, eq, type SQL, sql } from "drizzle-orm";
import {
  type EventType,
  recordWalletEvents,
  walletEventsInsert,
  walletEventsParams,
} from "../events/events.ts";
import { newId } from "../internal/crypto.ts";
import { historyCounts, transactions, wallets } from "../internal/db/schema.ts";
import { type Db, rowParams, statementsByShape, type Tx, tableColumns } from "../internal/db/store.ts";
import { errors } from "../internal/errors.ts";
import { formatUnits } from "../internal/money.ts";
import { addToHourSql, hourBucketParams } from "../policy/spend-window.ts";

export type TransactionRow = typeof transactions.$inferSelect;
export type TransactionType = TransactionRow["type"];
export const TRANSACTION_TYPES = ["send", "receive", "x402"] as const satisfies readonly TransactionType[];
export type TransactionStatus = TransactionRow["status"];
export const TRANSACTION_STATUSES = [
  "pending_approval",
  "pending",
  "confirmed",
  "failed",
  "rejected",
] as const satisfies readonly TransactionStatus[];

/** The Transaction of spec 2.4 with api.md's additions. */
export interface TransactionView {
  id: string;
  walletId: string;
  type: TransactionType;
  amount: string;
  token: string;
  chain: string;
  to: string;
  from: string;
  txHash?: string;
  timestamp: string;
  status: TransactionRow["status"];
  confirmedAt?: string;
  failureReason?: string;
  spendDecisionId?: string;
  /** x402: the URL of the resource paid for. */
  resource?: string;
  /** A spend held for the owner's approval (policy `approvalAbove`). */
  approval?: { status: NonNullable<TransactionRow["approvalStatus"]>; expiresAt: string; decidedAt?: string };
  /**
   * A spend that landed on chain (confirmed, or failed there): what it cost the wallet in the chain's native
   * coin beyond its amount (see {@link SpendFee}).
   */
  fee?: { amount: string; token: string };
}

/**
 * What a spend that landed cost its wallet in the chain's native coin beyond its amount, as the chain tells
 * it: the network fee and, on Solana, the rent of a token account it opened for its recipient. A failed
 * spend that landed paid it too.
 */
export interface SpendFee {
  atomic: bigint;
  /** The chain's native coin. */
  token: { symbol: string; decimals: number };
}

/** The columns recording a spend's fee. */
export function feeColumns(fee: SpendFee): Pick<TransactionRow, "feeAtomic" | "feeToken" | "feeDecimals"> {
  return { feeAtomic: fee.atomic, feeToken: fee.token.symbol, feeDecimals: fee.token.decimals };
}

export function toTransactionView(row: TransactionRow): TransactionView {
  return {
    id: row.id,
    walletId: row.walletId,
    type: row.type,
    amount: formatUnits(row.amountAtomic, row.decimals),
    token: row.token,
    chain: row.chain,
    to: row.toAddress,
    from: row.fromAddress,
    ...(row.txHash ? { txHash: row.txHash } : {}),
    timestamp: row.createdAt.toISOString(),
    status: row.status,
    ...(row.confirmedAt ? { confirmedAt: row.confirmedAt.toISOString() } : {}),
    ...(row.failureReason ? { failureReason: row.failureReason } : {}),
    ...(row.spendDecisionId ? { spendDecisionId: row.spendDecisionId } : {}),
    ...(row.resource ? { resource: row.resource } : {}),
    ...(row.approvalStatus && row.approvalExpiresAt
      ? {
          approval: {
            status: row.approvalStatus,
            expiresAt: row.approvalExpiresAt.toISOString(),
            ...(row.approvalDecidedAt ? { decidedAt: row.approvalDecidedAt.toISOString() } : {}),
          },
        }
      : {}),
    ...(row.feeAtomic !== null && row.feeToken !== null && row.feeDecimals !== null
      ? { fee: { amount: formatUnits(row.feeAtomic, row.feeDecimals), token: row.feeToken } }
      : {}),
  };
}

export type NewTransaction = Omit<typeof transactions.$inferInsert, "id"> & { id?: string };

/** What is recorded in the same statement as a transaction, besides its own event. */
export interface RecordedWith {
  /** More events about the wallet, written after the transaction's own, in order; given its view. */
  events?: (view: TransactionView) => readonly { type: EventType; data: object }[];
  /** USD micros the spend holds in the rolling window, added to its hour bucket (policy/spend-window.ts). */
  reservedUsdMicros?: bigint;
}

/**
 * Records a transaction with its event (`transaction.created`, or `transaction.received` for money coming
 * in), and what `also` says, in one statement: alone or as one step of a larger database transaction (a
 * spend's admission). The history counts follow from the database's trigger (migration 0009), so `total` is
 * always exact.
 * @example await recordTransaction(db, { walletId, type: "send", chain: "base", … });
 */
export async function recordTransaction(
  db: Db | Tx,
  input: NewTransaction,
  also: RecordedWith = {},
): Promise<TransactionRow> {
  return (await writeTransaction(db, input, also, "always")).row;
}

/**
 * The one write of a new transaction, its events and its hour bucket ({@link recordTransaction}); `once`, a
 * transfer already recorded under the same key writes nothing ({@link recordTransferOnce}).
 */
async function writeTransaction(
  db: Db | Tx,
  input: NewTransaction,
  also: RecordedWith,
  mode: "always" | "once",
): Promise<{ row: TransactionRow; inserted: boolean }> {
  // The row as the database holds it once inserted: every column is written (given, or NULL when unset),
  // so a column that gains a default must be given here (test/transactions.test.ts checks there is none).
  const row = {
    ...UNSET_COLUMNS,
    ...Object.fromEntries(Object.entries(input).filter(([, value]) => value !== undefined)),
    id: input.id ?? newId("tx"),
    createdAt: input.createdAt ?? new Date(),
  } as TransactionRow;
  const view = toTransactionView(row);
  const events = [{ type: announcementOf(row), data: view }, ...(also.events?.(view) ?? [])].map((event) => ({
    walletId: row.walletId,
    ...event,
  }));
  const reserved = also.reservedUsdMicros !== undefined && also.reservedUsdMicros > 0n;
  const shape = `${events.length}${reserved ? "r" : ""}${mode === "once" ? "o" : ""}` as const;
  const inserted = await recordStatement(shape)(db, [
    ...rowParams(transactions, row),
    ...walletEventsParams(events),
    ...(reserved ? hourBucketParams(row.walletId, row.createdAt, also.reservedUsdMicros ?? 0n) : []),
  ]);
  return { row, inserted: inserted.length > 0 };
}

/** The event of a newly recorded transaction: money coming in, or a spend starting. */
function announcementOf(row: TransactionRow): EventType {
  return row.type === "receive" ? "transaction.received" : "transaction.created";
}

/** The columns a new transaction leaves unset: all of them nullable, and none with a default. */
const UNSET_COLUMNS = {
  txHash: null,
  failureReason: null,
  spendDecisionId: null,
  requestedByKeyId: null,
  confirmedAt: null,
  usdMicros: null,
  rawTx: null,
  nonce: null,
  lastValidBlockHeight: null,
  broadcastAt: null,
  transferIndex: null,
  resource: null,
  x402Payment: null,
  x402PaymentKey: null,
  approvalStatus: null,
  approvalExpiresAt: null,
  approvalDecidedAt: null,
  feeAtomic: null,
  feeToken: null,
  feeDecimals: null,
  admissionSeq: null,
} satisfies Omit<TransactionRow, keyof typeof transactions.$inferInsert & RequiredKeys>;
type RequiredKeys =
  | "walletId"
  | "type"
  | "chain"
  | "token"
  | "amountAtomic"
  | "decimals"
  | "fromAddress"
  | "toAddress"
  | "status"
  | "id"
  | "createdAt";

/**
 * The statement of {@link writeTransaction}, by shape: the row, then its events and its hour bucket, as
 * CTEs of one statement (parameters in that order) that answers the row's id when it was inserted. `once`,
 * the row is inserted unless its transfer key is taken, and the events only with it.
 */
const recordStatement = statementsByShape<`${number}${"" | "r"}${"" | "o"}`, { id: string }>((shape) => {
  const eventCount = Number.parseInt(shape, 10);
  const { list, fields } = tableColumns(transactions);
  const values = fields.map((_, i) => `$${i + 1}`).join(", ");
  const eventsAt = fields.length + 1;
  const onConflict = shape.endsWith("o")
    ? " ON CONFLICT (chain, tx_hash, transfer_index, wallet_id) DO NOTHING"
    : "";
  const ctes = [
    `inserted AS (INSERT INTO transactions (${list}) VALUES (${values})${onConflict} RETURNING id)`,
    `announced AS (${walletEventsInsert(eventCount, eventsAt, "EXISTS (SELECT 1 FROM inserted)")})`,
  ];
  if (shape.includes("r")) ctes.push(`reserved AS (${addToHourSql(eventsAt + 4 * eventCount)})`);
  return {
    name: `record_transaction_${shape}`,
    text: `WITH ${ctes.join(", ")} SELECT id FROM inserted`,
    fields: [[["id"], transactions.id]],
  };
});

/** A spend found settled on chain: when, and the hash that settled it when it is known only now. */
export interface Settlement {
  transactionId: string;
  confirmedAt: Date;
  /** The hash, when it is known only now; null or absent keeps the one recorded. */
  txHash?: string | null;
  /** What it cost the wallet beyond its amount, when the chain told it; absent keeps what is recorded. */
  fee?: SpendFee | undefined;
}

/**
 * Moves pending spends to `confirmed` and writes their `transaction.confirmed` events, all in one database
 * transaction (a confirmer pass settles many at once). Returns the rows confirmed here, in the order given,
 * and writes the events in that order; one that was no longer pending (another caller settled it first) is
 * left as it is and not returned. The rows are locked in the order of their ids, whatever order they come
 * in, so two instances confirming overlapping batches cannot deadlock.
 * @example const [row] = await confirmTransactions(db, [{ transactionId, confirmedAt: blockTime }]);
 */
export async function confirmTransactions(
  db: Db,
  settlements: readonly Settlement[],
): Promise<TransactionRow[]> {
  if (settlements.length === 0) return [];
  return db.transaction(async (tx) => {
    const updated = await confirmStatement(settlements.length)(
      tx,
      settlements.flatMap((settled) => [
        settled.transactionId,
        settled.confirmedAt.toISOString(),
        settled.txHash ?? null,
        settled.fee?.atomic.toString() ?? null,
        settled.fee?.token.symbol ?? null,
        settled.fee?.token.decimals ?? null,
      ]),
    );
    const byId = new Map(updated.map((row) => [row.id, row]));
    const confirmed = settlements.flatMap((settled) => byId.get(settled.transactionId) ?? []);
    await recordWalletEvents(
      tx,
      confirmed.map((row) => ({
        walletId: row.walletId,
        type: "transaction.confirmed",
        data: toTransactionView(row),
      })),
    );
    return confirmed;
  });
}

/**
 * The update of {@link confirmTransactions}, by how many it settles (six parameters each: id, time, hash and
 * the fee's three columns): the rows still pending are locked in id order first, then moved to confirmed, in
 * one statement.
 */
const confirmStatement = statementsByShape<number, TransactionRow>((count) => {
  const { list, fields } = tableColumns(transactions, [], "t");
  const settled = Array.from(
    { length: count },
    (_, i) =>
      `($${6 * i + 1}, $${6 * i + 2}::timestamptz, $${6 * i + 3}, $${6 * i + 4}::numeric, $${6 * i + 5}, $${6 * i + 6}::integer)`,
  );
  return {
    name: `confirm_transactions_${count}`,
    text: `WITH settled (id, confirmed_at, tx_hash, fee_atomic, fee_token, fee_decimals) AS (VALUES ${settled.join(", ")}),
      locked AS MATERIALIZED (
        SELECT t.id FROM transactions t JOIN settled s ON s.id = t.id
        WHERE t.status = 'pending' ORDER BY t.id FOR UPDATE OF t)
      UPDATE transactions t
        SET status = 'confirmed', confirmed_at = s.confirmed_at, tx_hash = coalesce(s.tx_hash, t.tx_hash),
            failure_reason = NULL, fee_atomic = coalesce(s.fee_atomic, t.fee_atomic),
            fee_token = coalesce(s.fee_token, t.fee_token), fee_decimals = coalesce(s.fee_decimals, t.fee_decimals)
      FROM settled s JOIN locked l ON l.id = s.id
      WHERE t.id = s.id AND t.status = 'pending'
      RETURNING ${list}`,
    fields,
  };
});

/** A transfer into a wallet, keyed by where it is on chain. */
export type NewTransfer = NewTransaction & { txHash: string; transferIndex: number };

/**
 * Records a transfer into a wallet unless the same (chain, txHash, transferIndex, wallet) is already
 * recorded (counted only when inserted: the database's trigger, migration 0009), with its event, in one
 * statement. However many watchers and faucet calls record one transfer, at once or later, exactly one row
 * exists, it is counted once, and it is announced once.
 * Returns the row inserted, or undefined when it was already there.
 * @example await recordTransferOnce(db, { walletId, type: "receive", chain: "base", txHash, transferIndex: -1, … });
 */
export async function recordTransferOnce(
  db: Db | Tx,
  input: NewTransfer,
): Promise<TransactionRow | undefined> {
  const { row, inserted } = await writeTransaction(db, input, {}, "once");
  return inserted ? row : undefined;
}

/** The row recording a transfer into a wallet, if any. */
export async function findTransfer(
  db: Db,
  key: { chain: string; txHash: string; transferIndex: number; walletId: string },
): Promise<TransactionRow | undefined> {
  const [row] = await db
    .select()
    .from(transactions)
    .where(
      and(
        eq(transactions.chain, key.chain),
        eq(transactions.txHash, key.txHash),
        eq(transactions.transferIndex, key.transferIndex),
        eq(transactions.walletId, key.walletId),
      ),
    );
  return row;
}

export interface TransactionFilter {
  chain?: string | undefined;
  type?: TransactionType | undefined;
}

/**
 * One page of a wallet's history, newest first, and the exact number of matching rows. One statement reads
 * both, so the total is counted in the page's own snapshot: two statements on two connections could count a
 * transfer recorded between them on one side only.
 */
export async function listTransactions(
  db: Db,
  walletId: string,
  filter: TransactionFilter,
  page: { limit: number; offset: number },
): Promise<{ rows: TransactionRow[]; total: number }> {
  const rowConditions: SQL[] = [eq(transactions.walletId, walletId)];
  const countConditions: SQL[] = [eq(historyCounts.walletId, walletId)];
  if (filter.chain !== undefined) {
    rowConditions.push(eq(transactions.chain, filter.chain));
    countConditions.push(eq(historyCounts.chain, filter.chain));
  }
  if (filter.type !== undefined) {
    rowConditions.push(eq(transactions.type, filter.type));
    countConditions.push(eq(historyCounts.type, filter.type));
  }
  const counted = db
    .select({ total: sql<string>`coalesce(sum(${historyCounts.count}), 0)`.as("total") })
    .from(historyCounts)
    .where(and(...countConditions))
    .as("counted");
  const pageRows = db
    .select()
    .from(transactions)
    .where(and(...rowConditions))
    .orderBy(desc(transactions.createdAt), desc(transactions.id))
    .limit(page.limit)
    .offset(page.offset)
    .as("page");
  // The count is one row; the page joins it laterally, so an empty page still answers the total.
  const result = await db
    .select({ total: counted.total, row: pageRows._.selectedFields })
    .from(counted)
    .leftJoinLateral(pageRows, sql`true`)
    .orderBy(desc(pageRows.createdAt), desc(pageRows.id));
  const rows = result.flatMap((r) => (r.row === null ? [] : [r.row]));
  return { rows, total: Number(result[0]?.total ?? 0) };
}

/** A transaction by id, if it belongs to one of the account's wallets; NotFound otherwise. */
export async function findTransactionForAccount(
  db: Db,
  accountId: string,
  transactionId: string,
): Promise<TransactionRow> {
  const [row] = await db
    .select({ transaction: transactions })
    .from(transactions)
    .innerJoin(wallets, eq(wallets.id, transactions.walletId))
    .where(and(eq(transactions.id, transactionId), eq(wallets.accountId, accountId)));
  if (!row) throw errors.transactionNotFound(transactionId);
  return row.transaction;
}
