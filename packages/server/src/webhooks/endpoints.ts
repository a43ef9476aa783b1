/**
 * Webhook endpoints: URLs an account's events are sent to, signed as Standard Webhooks specifies. The
 * sending itself is `delivery.ts`; here are the records an admin creates, reads and deletes.
 */
import { randomBytes } from "node:crypto";
import { and, desc, eq, isNull, sql } from "drizzle-orm";
import { lockAccount } from "../accounts/accounts.ts";
import type { EventType } from "../events/events.ts";
import { newId } from "../internal/crypto.ts";
import { events, webhookDeliveries, webhookEndpoints, webhookRedeliveries } from "../internal/db/schema.ts";
import type { Db, Tx } from "../internal/db/store.ts";
import { errors } from "../internal/errors.ts";
import type { Keyring } from "../wallets/keyring.ts";
import type { OutboundFetcher } from "../x402/outbound-fetch.ts";

/** Endpoints an account may have at once (deleted ones do not count). */
export const MAX_ENDPOINTS_PER_ACCOUNT = 20;

/**
 * Redeliveries an endpoint may have waiting (the one being sent included). They go out one at a time,
 * each waiting up to a delivery's timeout, so a longer queue would only grow.
 */
export const MAX_QUEUED_REDELIVERIES = 100;

export type WebhookEndpointRow = typeof webhookEndpoints.$inferSelect;

/** An endpoint as the API shows it; never its secret. */
export interface WebhookEndpointView {
  id: string;
  url: string;
  /** The event types sent; null = every type. */
  events: EventType[] | null;
  description: string | null;
  createdAt: string;
}

export function toEndpointView(row: WebhookEndpointRow): WebhookEndpointView {
  return {
    id: row.id,
    url: row.url,
    events: (row.eventTypes as EventType[] | null) ?? null,
    description: row.description,
    createdAt: row.createdAt.toISOString(),
  };
}

/** The associated data a secret is sealed with: the endpoint's own id, so it opens for that row only. */
export function secretAssociatedData(endpointId: string): string {
  return `webhook_endpoints:${endpointId}`;
}

/** A new signing secret in the Standard Webhooks form: `whsec_` and 32 random bytes in base64. */
function generateSecret(): string {
  return `whsec_${randomBytes(32).toString("base64")}`;
}

/**
 * Checks a target URL before it is stored: http or https, no credentials, a port other than 0, and a
 * destination the webhooks' outbound guard would connect to ({@link OutboundFetcher.checkDestination}: not a
 * refused address, by itself or by what its name resolves to now, and not one of the service's own backends).
 * Deliveries check it again, on what the name then resolves to.
 */
export async function checkTargetUrl(text: string, outbound: OutboundFetcher): Promise<URL> {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw errors.invalidBody("url must be an absolute http:// or https:// URL");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:")
    throw errors.invalidBody(`url must be http:// or https://, not ${url.protocol}`);
  if (url.username !== "" || url.password !== "")
    throw errors.invalidBody("url must not carry credentials (user:password@)");
  if (url.port === "0") throw errors.invalidBody("url's port must be 1-65535: nothing listens on port 0");
  return outbound.checkDestination(url.href);
}

/** How long a rotated-out secret signs beside the new one unless told: a day. */
export const DEFAULT_PREVIOUS_SECRET_SECONDS = 86_400;
/** The longest it may: a week. */
export const MAX_PREVIOUS_SECRET_SECONDS = 7 * 86_400;

/**
 * Gives an endpoint a new signing secret, returned here once. The one it replaces signs each delivery beside
 * the new one (two signatures in `webhook-signature`, as Standard Webhooks allows) for `previousForSeconds`
 * more (0: from now on only the new one), so a receiver can move to the new secret without a delivery it
 * cannot verify; a secret rotated out before is dropped.
 * @example const { endpoint, secret } = await rotateEndpointSecret(db, keyring, accountId, "wh_…", 86_400, new Date());
 */
export async function rotateEndpointSecret(
  db: Db,
  keyring: Keyring,
  accountId: string,
  endpointId: string,
  previousForSeconds: number,
  now: Date,
): Promise<{ endpoint: WebhookEndpointRow; secret: string }> {
  const secret = generateSecret();
  const sealedSecret = keyring.sealSecret(Buffer.from(secret, "utf8"), secretAssociatedData(endpointId));
  const keepPrevious = previousForSeconds > 0;
  const [endpoint] = await db
    .update(webhookEndpoints)
    .set({
      sealedSecret,
      sealedPreviousSecret: keepPrevious ? sql`${webhookEndpoints.sealedSecret}` : null,
      previousSecretExpiresAt: keepPrevious ? new Date(now.getTime() + previousForSeconds * 1000) : null,
    })
    .where(
      and(
        eq(webhookEndpoints.id, endpointId),
        eq(webhookEndpoints.accountId, accountId),
        isNull(webhookEndpoints.deletedAt),
      ),
    )
    .returning();
  if (!endpoint) throw errors.webhookEndpointNotFound(endpointId);
  return { endpoint, secret };
}

export interface CreateEndpointInput {
  url: string;
  events?: EventType[] | undefined;
  description?: string | undefined;
}

/**
 * Creates an endpoint and its signing secret; the secret is in the result and, sealed, in the store, and
 * nowhere else. The endpoint receives the events that commit after it: its cursor starts at the oldest
 * transaction still running, and the events its own snapshot already saw are passed over (`start_snapshot`).
 * @example const { endpoint, secret } = await createEndpoint(db, keyring, accountId, { url });
 */
export async function createEndpoint(
  db: Db,
  keyring: Keyring,
  accountId: string,
  input: CreateEndpointInput,
): Promise<{ endpoint: WebhookEndpointRow; secret: string }> {
  const id = newId("wh");
  const secret = generateSecret();
  const sealedSecret = keyring.sealSecret(Buffer.from(secret, "utf8"), secretAssociatedData(id));
  const eventTypes = input.events ? [...new Set(input.events)] : null;
  const endpoint = await db.transaction(async (tx) => {
    await lockAccount(tx, accountId);
    const count = await tx.$count(
      webhookEndpoints,
      and(eq(webhookEndpoints.accountId, accountId), isNull(webhookEndpoints.deletedAt)),
    );
    if (count >= MAX_ENDPOINTS_PER_ACCOUNT) throw errors.tooManyWebhookEndpoints(MAX_ENDPOINTS_PER_ACCOUNT);
    const [row] = await tx
      .insert(webhookEndpoints)
      .values({
        id,
        accountId,
        url: input.url,
        eventTypes,
        description: input.description ?? null,
        sealedSecret,
        cursorTxId: sql`pg_snapshot_xmin(pg_current_snapshot())::text::bigint`,
        cursorSeq: 0n,
        startSnapshot: sql`pg_current_snapshot()::text`,
        attempts: 0,
      })
      .returning();
    if (!row) throw errors.internal(new Error("insert returned no row"));
    return row;
  });
  return { endpoint, secret };
}

/** The account's endpoints not deleted, newest first. */
export async function listEndpoints(db: Db, accountId: string): Promise<WebhookEndpointRow[]> {
  return await db
    .select()
    .from(webhookEndpoints)
    .where(and(eq(webhookEndpoints.accountId, accountId), isNull(webhookEndpoints.deletedAt)))
    .orderBy(desc(webhookEndpoints.createdAt), desc(webhookEndpoints.id));
}

/** An endpoint of the account that is not deleted; NotFound otherwise (another account's included). */
export async function findEndpoint(db: Db | Tx, accountId: string, id: string): Promise<WebhookEndpointRow> {
  const [row] = await db
    .select()
    .from(webhookEndpoints)
    .where(
      and(
        eq(webhookEndpoints.id, id),
        eq(webhookEndpoints.accountId, accountId),
        isNull(webhookEndpoints.deletedAt),
      ),
    );
  if (!row) throw errors.webhookEndpointNotFound(id);
  return row;
}

/**
 * Deletes an endpoint: nothing more is sent to it (an attempt already under way ends and is logged). Deleting
 * a deleted endpoint succeeds again; one the account never had is NotFound.
 */
export async function deleteEndpoint(db: Db, accountId: string, id: string, now: Date): Promise<void> {
  const ofAccount = and(eq(webhookEndpoints.id, id), eq(webhookEndpoints.accountId, accountId));
  const deleted = await db.transaction(async (tx) => {
    // Under the lock redeliveries are queued under: none is queued for it once it is gone.
    await lockAccount(tx, accountId);
    const [row] = await tx
      .update(webhookEndpoints)
      .set({ deletedAt: now })
      .where(and(ofAccount, isNull(webhookEndpoints.deletedAt)))
      .returning({ id: webhookEndpoints.id });
    if (row) await tx.delete(webhookRedeliveries).where(eq(webhookRedeliveries.endpointId, id));
    return row;
  });
  if (deleted) return;
  const [existing] = await db.select({ id: webhookEndpoints.id }).from(webhookEndpoints).where(ofAccount);
  if (!existing) throw errors.webhookEndpointNotFound(id);
}

/** One attempt to deliver an event, as the API shows it. */
export interface DeliveryView {
  eventId: string;
  attempt: number;
  status: "succeeded" | "failed" | "gave_up";
  redelivery: boolean;
  responseStatus: number | null;
  error?: string;
  at: string;
}

/** The endpoint's delivery attempts, newest first, at most `limit`; only those of `eventId` when given. */
export async function listDeliveries(
  db: Db,
  accountId: string,
  endpointId: string,
  options: { eventId?: string | undefined; limit: number },
): Promise<DeliveryView[]> {
  await findEndpoint(db, accountId, endpointId);
  const conditions = [eq(webhookDeliveries.endpointId, endpointId)];
  if (options.eventId !== undefined) conditions.push(eq(webhookDeliveries.eventId, options.eventId));
  const rows = await db
    .select()
    .from(webhookDeliveries)
    .where(and(...conditions))
    .orderBy(desc(webhookDeliveries.id))
    .limit(options.limit);
  return rows.map((row) => ({
    eventId: row.eventId,
    attempt: row.attempt,
    status: row.status,
    redelivery: row.redelivery,
    responseStatus: row.responseStatus,
    ...(row.error === null ? {} : { error: row.error }),
    at: row.at.toISOString(),
  }));
}

/**
 * Queues one more attempt to send an event to an endpoint, outside its order and whatever became of the
 * event before. The event must be the account's and of a type the endpoint receives, and the endpoint's
 * queue shorter than {@link MAX_QUEUED_REDELIVERIES} (409 `too_many_redeliveries` otherwise).
 */
export async function requestRedelivery(
  db: Db,
  accountId: string,
  endpointId: string,
  eventId: string,
): Promise<void> {
  await db.transaction(async (tx) => {
    // Deleting the endpoint takes this lock too (and drops its queue).
    await lockAccount(tx, accountId);
    const endpoint = await findEndpoint(tx, accountId, endpointId);
    // Held against the retention sweep, which skips what is held and deletes what it holds itself.
    const [event] = await tx
      .select({ type: events.type })
      .from(events)
      .where(and(eq(events.id, eventId), eq(events.accountId, accountId)))
      .for("key share");
    if (!event) throw errors.eventNotFound(eventId);
    if (endpoint.eventTypes !== null && !endpoint.eventTypes.includes(event.type))
      throw errors.eventNotSubscribed(eventId, event.type, endpointId);
    const queued = await tx.$count(webhookRedeliveries, eq(webhookRedeliveries.endpointId, endpointId));
    if (queued >= MAX_QUEUED_REDELIVERIES)
      throw errors.tooManyRedeliveries(endpointId, MAX_QUEUED_REDELIVERIES);
    await tx.insert(webhookRedeliveries).values({ endpointId, eventId });
  });
}
