/**
 * Events: what changed, written in the same database transaction as the change (a transactional outbox), so
 * an event exists exactly when its change committed. Clients poll them (`GET /v1/events`) and webhook
 * endpoints receive them.
 */
import { and, asc, eq, gt, inArray, or, type SQL, sql } from "drizzle-orm";
import { newId } from "../internal/crypto.ts";
import { events, wallets } from "../internal/db/schema.ts";
import type { Db, Tx } from "../internal/db/store.ts";

export const EVENT_TYPES = [
  "transaction.created",
  "transaction.confirmed",
  "transaction.failed",
  "transaction.received",
  "spend.alert",
  "approval.requested",
  "approval.approved",
  "approval.rejected",
  "approval.expired",
  "policy.updated",
  "wallet.archived",
  "api_key.created",
  "api_key.revoked",
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

export type EventRow = typeof events.$inferSelect;

/** An event as the API shows it: `data` is the resource as it stood when the change committed. */
export interface EventView {
  id: string;
  type: EventType;
  createdAt: string;
  data: Record<string, unknown>;
}

export function toEventView(row: EventRow): EventView {
  return { id: row.id, type: row.type as EventType, createdAt: row.createdAt.toISOString(), data: row.data };
}

/** What an event is about: a wallet (its account is the wallet's), or the account as a whole. */
export type EventSubject = { walletId: string } | { accountId: string };

/**
 * Writes an event; call it inside the database transaction of the change it reports, so both commit or
 * neither does.
 * @example await recordEvent(tx, { walletId }, "policy.updated", toPolicyView(row));
 */
export async function recordEvent(
  tx: Db | Tx,
  subject: EventSubject,
  type: EventType,
  data: object,
): Promise<void> {
  if ("accountId" in subject) {
    await tx.insert(events).values({
      id: newId("evt"),
      accountId: subject.accountId,
      walletId: null,
      type,
      data: data as Record<string, unknown>,
    });
    return;
  }
  await recordWalletEvents(tx, type, [{ walletId: subject.walletId, data }]);
}

/**
 * Writes one event of `type` per entry, each about its wallet, in one statement and in the entries' order
 * (what a batch of changes committed together reports, such as the confirmations of one confirmer pass).
 * Call it inside the database transaction of the changes, as {@link recordEvent}.
 */
export async function recordWalletEvents(
  tx: Db | Tx,
  type: EventType,
  entries: readonly { walletId: string; data: object }[],
): Promise<void> {
  if (entries.length === 0) return;
  const rows = entries.map(
    ({ walletId, data }, i) => sql`(${newId("evt")}, ${walletId}, ${JSON.stringify(data)}, ${i}::int)`,
  );
  // The account is each wallet's: one statement, no read before it.
  await tx.execute(sql`
    INSERT INTO ${events} (id, account_id, wallet_id, type, data)
    SELECT v.id, ${wallets.accountId}, ${wallets.id}, ${type}, v.data::json
    FROM (VALUES ${sql.join(rows, sql`, `)}) AS v(id, wallet_id, data, ord)
    JOIN ${wallets} ON ${wallets.id} = v.wallet_id
    ORDER BY v.ord`);
}

/**
 * A position in an account's event stream: the writing transaction's id and the event's sequence number.
 * On the wire it is `<txId>.<seq>`; "0.0" is the start.
 */
export interface EventCursor {
  txId: bigint;
  seq: bigint;
}

export const START_CURSOR: EventCursor = { txId: 0n, seq: 0n };

export function formatCursor(cursor: EventCursor): string {
  return `${cursor.txId}.${cursor.seq}`;
}

/** The cursor a string names, or undefined when it names none. */
export function parseCursor(text: string): EventCursor | undefined {
  const match = /^(\d{1,19})\.(\d{1,19})$/.exec(text);
  if (!match?.[1] || !match[2]) return undefined;
  const cursor = { txId: BigInt(match[1]), seq: BigInt(match[2]) };
  const max = 2n ** 63n - 1n;
  return cursor.txId > max || cursor.seq > max ? undefined : cursor;
}

export interface EventFilter {
  accountId: string;
  /** Only events about these wallets (account-wide events excluded); undefined = every event of the account. */
  walletIds?: readonly string[] | undefined;
  types?: readonly EventType[] | undefined;
}

/**
 * Events after `after`, oldest first, and the cursor to read on from. Only events whose transaction is older
 * than every transaction still running are read: a transaction that started earlier but commits later
 * cannot put an event behind a cursor already handed out.
 */
export async function listEvents(
  db: Db | Tx,
  filter: EventFilter,
  after: EventCursor,
  limit: number,
): Promise<{ rows: EventRow[]; nextCursor: EventCursor }> {
  const conditions: SQL[] = [
    eq(events.accountId, filter.accountId),
    or(gt(events.txId, after.txId), and(eq(events.txId, after.txId), gt(events.seq, after.seq))) as SQL,
    sql`${events.txId} < pg_snapshot_xmin(pg_current_snapshot())::text::bigint`,
  ];
  if (filter.walletIds !== undefined) {
    if (filter.walletIds.length === 0) return { rows: [], nextCursor: after };
    conditions.push(inArray(events.walletId, [...filter.walletIds]));
  }
  if (filter.types !== undefined) conditions.push(inArray(events.type, [...filter.types]));
  const rows = await db
    .select()
    .from(events)
    .where(and(...conditions))
    .orderBy(asc(events.txId), asc(events.seq))
    .limit(limit);
  const last = rows.at(-1);
  return { rows, nextCursor: last ? { txId: last.txId, seq: last.seq } : after };
}
