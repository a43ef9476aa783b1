/**
 * Events: what changed, written in the same database transaction as the change (a transactional outbox), so
 * an event exists exactly when its change committed. Clients poll them (`GET /v1/events`) and webhook
 * endpoints receive them.
 */
import { and, asc, eq, gt, inArray, isNotNull, or, type SQL, sql } from "drizzle-orm";
import { newId } from "../internal/crypto.ts";
import { events, webhookDeliveries, webhookRedeliveries } from "../internal/db/schema.ts";
import { type Db, selectRows, statementsByShape, type Tx } from "../internal/db/store.ts";

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
  "wallet.restored",
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
  await recordWalletEvents(tx, [{ walletId: subject.walletId, type, data }]);
}

/** One event about a wallet, as {@link recordWalletEvents} and {@link walletEventsInsert} write it. */
export interface WalletEvent {
  walletId: string;
  type: EventType;
  data: object;
}

/**
 * Writes one event per entry, each about its wallet, in one statement and in the entries' order (what a
 * batch of changes committed together reports, such as the confirmations of one confirmer pass). Call it
 * inside the database transaction of the changes, as {@link recordEvent}.
 */
export async function recordWalletEvents(tx: Db | Tx, entries: readonly WalletEvent[]): Promise<void> {
  if (entries.length === 0) return;
  await walletEventsStatement(entries.length)(tx, walletEventsParams(entries));
}
const walletEventsStatement = statementsByShape((count: number) => ({
  name: `wallet_events_${count}`,
  text: walletEventsInsert(count, 1),
}));

/**
 * The SQL text of an INSERT of `count` wallet events whose parameters start at `$first`
 * ({@link walletEventsParams}' order), in their order: what {@link recordWalletEvents} runs, and what a
 * statement that records a change with its events embeds, with the condition `onlyIf` on them (a change
 * that may not happen: the events are written only when it does). The account is each wallet's, with no read
 * before.
 */
export function walletEventsInsert(count: number, first: number, onlyIf = "true"): string {
  const rows = Array.from({ length: count }, (_, i) => {
    const at = first + 4 * i;
    return `($${at}, $${at + 1}, $${at + 2}, $${at + 3}, ${i})`;
  });
  return `INSERT INTO events (id, wallet_id, type, data, account_id)
    SELECT v.id, w.id, v.type, v.data::json, w.account_id
    FROM (VALUES ${rows.join(", ")}) AS v(id, wallet_id, type, data, ord)
    JOIN wallets w ON w.id = v.wallet_id
    WHERE ${onlyIf}
    ORDER BY v.ord`;
}

/** The parameters of {@link walletEventsInsert}: four per event (a new id, the wallet, the type, the data). */
export function walletEventsParams(entries: readonly WalletEvent[]): unknown[] {
  return entries.flatMap(({ walletId, type, data }) => [newId("evt"), walletId, type, JSON.stringify(data)]);
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
  /**
   * Only events about these wallets, or about any wallet with `"any"` (account-wide events, such as API keys',
   * excluded either way); undefined = every event of the account.
   */
  walletIds?: readonly string[] | "any" | undefined;
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
  if (filter.walletIds === "any") conditions.push(isNotNull(events.walletId));
  else if (filter.walletIds !== undefined) {
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

/** Events a sweep deletes per statement: short statements, whatever the backlog. */
const SWEEP_BATCH = 1_000;

/**
 * Deletes the events written before `before`, oldest first and in batches, with the webhook delivery
 * records and queued redeliveries of them; returns how many events went. Without it the table grows by
 * every change, for good. A webhook endpoint that has not received an event by then no longer does.
 *
 * Each batch locks its events first, then their queued redeliveries, skipping what others hold (`SKIP
 * LOCKED`, so the sweep never waits on a deliverer): an event that a delivery record or redelivery is being
 * written for, or whose redelivery is being finished, stays for a later sweep; one written for afterwards
 * waits and then finds the event gone. None is left referring to a deleted event.
 * @example await sweepEvents(db, new Date(Date.now() - 30 * 86_400_000));
 */
export async function sweepEvents(db: Db, before: Date): Promise<number> {
  let swept = 0;
  for (;;) {
    const batch = await db.transaction(async (tx) => {
      const old = await selectRows<{ id: string }>(
        tx,
        sql`SELECT id FROM events WHERE created_at < ${before.toISOString()}::timestamptz
            ORDER BY created_at LIMIT ${SWEEP_BATCH} FOR UPDATE SKIP LOCKED`,
      );
      if (old.length === 0) return { read: 0, deleted: 0 };
      const candidates = old.map((row) => row.id);
      const queued = await tx
        .select({ id: webhookRedeliveries.id, eventId: webhookRedeliveries.eventId })
        .from(webhookRedeliveries)
        .where(inArray(webhookRedeliveries.eventId, candidates))
        .for("update", { skipLocked: true });
      const all = await tx
        .select({ id: webhookRedeliveries.id, eventId: webhookRedeliveries.eventId })
        .from(webhookRedeliveries)
        .where(inArray(webhookRedeliveries.eventId, candidates));
      // A redelivery whose finishing statement is running holds its row (and waits for the event's lock):
      // its event waits for a later sweep. One merely being sent holds nothing; its attempt goes unlogged.
      const locked = new Set(queued.map((row) => row.id));
      const busy = new Set(all.filter((row) => !locked.has(row.id)).map((row) => row.eventId));
      const ids = candidates.filter((id) => !busy.has(id));
      if (ids.length > 0) {
        await tx.delete(webhookDeliveries).where(inArray(webhookDeliveries.eventId, ids));
        await tx.delete(webhookRedeliveries).where(inArray(webhookRedeliveries.eventId, ids));
        await tx.delete(events).where(inArray(events.id, ids));
      }
      return { read: old.length, deleted: ids.length };
    });
    swept += batch.deleted;
    // A batch that could delete nothing (all held) is left to the next sweep rather than read again at once.
    if (batch.read < SWEEP_BATCH || batch.deleted === 0) return swept;
  }
}
