/**
 * Sends each webhook endpoint its events, one at a time and in order, signed as Standard Webhooks specifies,
 * retrying a failed one with growing delays for up to three days. Several instances may run on one
 * PostgreSQL: an instance leases an endpoint before working it (a conditional UPDATE over rows locked with
 * SKIP LOCKED), and every write it makes is conditional on still holding that lease, so each event goes to
 * each endpoint from one instance, not from every instance. Everything an instance knows is in the store:
 * a restart carries on where the last attempt left off.
 */
import { and, eq, type SQL, sql } from "drizzle-orm";
import type { Logger } from "pino";
import { Webhook } from "standardwebhooks";
import { type EventRow, type EventType, listEvents } from "../events/events.ts";
import { randomBase62 } from "../internal/crypto.ts";
import { events, webhookDeliveries, webhookEndpoints, webhookRedeliveries } from "../internal/db/schema.ts";
import { type Db, selectRows } from "../internal/db/store.ts";
import { AppError } from "../internal/errors.ts";
import type { Keyring } from "../wallets/keyring.ts";
import type { OutboundFetcher } from "../x402/outbound-fetch.ts";
import { secretAssociatedData, type WebhookEndpointRow } from "./endpoints.ts";

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

/**
 * The wait after each failed attempt: the second attempt 5 s after the first, the third 30 s after that, and
 * so on; after the last entry, every 12 h.
 */
export const RETRY_DELAYS_MS = [
  5 * SECOND,
  30 * SECOND,
  2 * MINUTE,
  10 * MINUTE,
  30 * MINUTE,
  HOUR,
  2 * HOUR,
  4 * HOUR,
  8 * HOUR,
  12 * HOUR,
] as const;

/** An event is retried while its next attempt would fall within this long of its first; then given up. */
export const RETRY_WINDOW_MS = 3 * 24 * HOUR;

/** How long a lease lasts; each write renews it, and one attempt is bounded well below it. */
const LEASE_MS = 60 * SECOND;

/** Endpoints one instance works at once. */
const MAX_CONCURRENT_ENDPOINTS = 16;

/**
 * Endpoints of one account an instance works at once: a quarter of them. An attempt holds its slot until it
 * ends (up to the attempt's timeout), so one account's hanging receivers held every slot, and every other
 * account's deliveries waited for a timeout.
 */
const MAX_CONCURRENT_ENDPOINTS_PER_ACCOUNT = MAX_CONCURRENT_ENDPOINTS / 4;

/**
 * How long an endpoint keeps its slot while every slot is taken: then it lets go and joins the back of the
 * line, so that slow receivers with long queues (one account's, say) cannot hold every other endpoint back
 * until they are done.
 */
const WORK_SLICE_MS = 1_000;

/** Events read at once for an endpoint; they are still sent one at a time. */
const EVENTS_PER_READ = 50;

/** At most this much of a receiver's answer is kept, as the error of a failed attempt. */
const ERROR_TEXT_CHARS = 200;

/**
 * SQL: whether the event an endpoint row (`endpoint`, an alias) has failed attempts at was deleted since
 * (by the retention sweep). Its retry wait then no longer holds the events after it.
 */
function attemptsEventGone(endpoint: SQL): SQL {
  return sql`(${endpoint}.attempts_event_id IS NOT NULL AND NOT EXISTS (
    SELECT 1 FROM ${events} gone WHERE gone.id = ${endpoint}.attempts_event_id))`;
}

/** When the attempt after the `failedAttempts`-th failure is due, or undefined when the event is given up. */
export function nextAttemptAt(firstAttemptAt: Date, failedAttempts: number, now: Date): Date | undefined {
  const delay = RETRY_DELAYS_MS[failedAttempts - 1] ?? RETRY_DELAYS_MS[RETRY_DELAYS_MS.length - 1] ?? HOUR;
  const next = new Date(now.getTime() + delay);
  return next.getTime() - firstAttemptAt.getTime() > RETRY_WINDOW_MS ? undefined : next;
}

export interface WebhookDelivererDeps {
  db: Db;
  keyring: Keyring;
  /** The outbound guard the requests go through (SVC_OUTBOUND_ALLOW), with a short timeout, no redirects. */
  outbound: OutboundFetcher;
  log: Logger;
  /** The clock attempts are timed and scheduled by; tests move it forward instead of sleeping. */
  now: () => Date;
}

/** What came of one attempt. */
interface AttemptOutcome {
  ok: boolean;
  responseStatus: number | null;
  error: string | null;
}

/** The body a receiver gets: Standard Webhooks' `{ type, timestamp, data }`. */
export function webhookPayload(event: EventRow): string {
  return JSON.stringify({ type: event.type, timestamp: event.createdAt.toISOString(), data: event.data });
}

/**
 * The delivery worker: every `pollMs` it leases the endpoints that have something to send (an event after
 * their cursor, due, or a redelivery asked for) and works each until it has nothing due.
 * @example
 * const deliverer = new WebhookDeliverer({ db, keyring, outbound, log, now }, 200);
 * deliverer.start();
 * await deliverer.stop();
 */
export class WebhookDeliverer {
  /** This instance's name in the leases it takes. */
  readonly owner = `wd_${randomBase62(16)}`;
  readonly #working = new Map<string, Promise<void>>();
  /** The account of each endpoint being worked. */
  readonly #workingFor = new Map<string, string>();
  #timer: NodeJS.Timeout | undefined;
  #polling: Promise<void> | undefined;
  #stopped = false;

  constructor(
    readonly deps: WebhookDelivererDeps,
    readonly pollMs: number,
  ) {}

  start(): void {
    const tick = async () => {
      if (this.#stopped) return;
      this.#polling = this.pollOnce().catch((error: unknown) =>
        this.deps.log.warn({ err: error }, "webhook delivery poll failed; will retry"),
      );
      await this.#polling;
      if (!this.#stopped) this.#timer = setTimeout(tick, this.pollMs);
    };
    void tick();
  }

  /** Stops polling and waits for the attempts under way (each bounded by the outbound timeout). */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    await this.#polling;
    await Promise.all(this.#working.values());
  }

  /** Whether this instance works as many of the account's endpoints as it may at once. */
  #fullShare(accountId: string): boolean {
    let working = 0;
    for (const account of this.#workingFor.values()) if (account === accountId) working++;
    return working >= MAX_CONCURRENT_ENDPOINTS_PER_ACCOUNT;
  }

  /** Leases what has work and starts working it; does not wait for the work. */
  async pollOnce(): Promise<void> {
    const room = MAX_CONCURRENT_ENDPOINTS - this.#working.size;
    if (room <= 0) return;
    const now = this.deps.now();
    const busy = [...this.#working.keys()];
    const full = [...new Set(this.#workingFor.values())].filter((account) => this.#fullShare(account));
    const leased = await selectRows<{ id: string; account_id: string }>(
      this.deps.db,
      sql`
      UPDATE ${webhookEndpoints} SET lease_owner = ${this.owner}, leased_until = ${new Date(now.getTime() + LEASE_MS)}
      WHERE (leased_until IS NULL OR leased_until <= ${now}) AND id IN (
        SELECT e.id FROM ${webhookEndpoints} e
        WHERE e.deleted_at IS NULL
          AND (e.leased_until IS NULL OR e.leased_until <= ${now})
          AND NOT (e.id = ANY (${toTextArray(busy)}::text[]))
          AND NOT (e.account_id = ANY (${toTextArray(full)}::text[]))
          AND (
            EXISTS (SELECT 1 FROM ${webhookRedeliveries} r WHERE r.endpoint_id = e.id)
            OR ((e.next_attempt_at IS NULL OR e.next_attempt_at <= ${now} OR ${attemptsEventGone(sql`e`)}) AND EXISTS (
              SELECT 1 FROM events v
              WHERE v.account_id = e.account_id
                AND (v.tx_id, v.seq) > (e.cursor_tx_id, e.cursor_seq)
                AND v.tx_id < pg_snapshot_xmin(pg_current_snapshot())::text::bigint
                AND (e.event_types IS NULL OR v.type = ANY (e.event_types))))
          )
        ORDER BY e.next_attempt_at NULLS FIRST
        LIMIT ${room}
        FOR UPDATE SKIP LOCKED)
      RETURNING id, account_id`,
    );
    const overShare: string[] = [];
    for (const { id, account_id: account } of leased) {
      if (this.#fullShare(account)) {
        overShare.push(id);
        continue;
      }
      this.#workingFor.set(id, account);
      const work = this.#work(id, account)
        .catch((error: unknown) => {
          this.deps.log.warn({ err: error, endpointId: id }, "webhook delivery stopped early; will retry");
          return this.#release(id);
        })
        .catch(() => undefined)
        .finally(() => {
          this.#working.delete(id);
          this.#workingFor.delete(id);
        });
      this.#working.set(id, work);
    }
    // More of one account than its share in this batch: let go, to be leased again in turn (once the others
    // are under way, and a failure to let go only delays them until their lease runs out).
    for (const id of overShare) {
      await this.#release(id).catch((error: unknown) =>
        this.deps.log.warn({ err: error, endpointId: id }, "webhook endpoint lease not let go; it runs out"),
      );
    }
  }

  /**
   * Works one leased endpoint: redeliveries first, then its events in order while they are due, until it has
   * nothing more to send now.
   */
  async #work(endpointId: string, accountId: string): Promise<void> {
    const started = Date.now();
    const sliceUsed = () =>
      (this.#working.size >= MAX_CONCURRENT_ENDPOINTS || this.#fullShare(accountId)) &&
      Date.now() - started >= WORK_SLICE_MS;
    for (;;) {
      const [endpoint] = await this.deps.db
        .select()
        .from(webhookEndpoints)
        .where(and(eq(webhookEndpoints.id, endpointId), eq(webhookEndpoints.leaseOwner, this.owner)));
      if (!endpoint) return; // another instance holds it now
      if (this.#stopped || endpoint.deletedAt !== null) return this.#release(endpointId);
      if (sliceUsed()) return this.#release(endpointId, { backOfLine: true });

      const [redelivery] = await this.deps.db
        .select()
        .from(webhookRedeliveries)
        .where(eq(webhookRedeliveries.endpointId, endpointId))
        .orderBy(webhookRedeliveries.id)
        .limit(1);
      if (redelivery) {
        const event = await this.#event(endpoint, redelivery.eventId);
        const outcome = event ? await this.#attempt(endpoint, event) : undefined;
        await this.#record(
          endpoint,
          {},
          {
            ...(event && outcome
              ? {
                  delivery: {
                    eventId: event.id,
                    status: outcome.ok ? "succeeded" : "failed",
                    redelivery: true,
                    outcome,
                  },
                }
              : {}),
            redeliveryId: redelivery.id,
          },
        );
        continue;
      }

      if (
        endpoint.nextAttemptAt !== null &&
        endpoint.nextAttemptAt > this.deps.now() &&
        !(await this.#attemptsEventGone(endpoint))
      )
        return this.#release(endpointId);
      const { rows } = await listEvents(
        this.deps.db,
        {
          accountId: endpoint.accountId,
          types: (endpoint.eventTypes as EventType[] | null) ?? undefined,
        },
        { txId: endpoint.cursorTxId, seq: endpoint.cursorSeq },
        EVENTS_PER_READ,
      );
      if (rows.length === 0) return this.#release(endpointId);
      let state: WebhookEndpointRow | undefined = endpoint;
      for (const event of rows) {
        state = await this.#deliverNext(state, event);
        if (!state) return; // due later (the lease is let go), or another instance holds it now
        if (this.#stopped || state.deletedAt !== null) return this.#release(endpointId);
        if (sliceUsed()) return this.#release(endpointId, { backOfLine: true });
      }
      // Then redeliveries asked for meanwhile, and the next events.
    }
  }

  /**
   * Sends the event after the endpoint's cursor until it is acknowledged or given up; answers the endpoint as
   * it then stands, or undefined when this instance no longer works it (the event is due again later, or the
   * lease was lost).
   */
  async #deliverNext(endpoint: WebhookEndpointRow, event: EventRow): Promise<WebhookEndpointRow | undefined> {
    const endpointId = endpoint.id;
    const passed = {
      cursorTxId: event.txId,
      cursorSeq: event.seq,
      attempts: 0,
      attemptsEventId: null,
      firstAttemptAt: null,
      nextAttemptAt: null,
    };
    // Committed before the endpoint existed: not its to receive.
    if (committedBefore(event.txId, endpoint.startSnapshot)) return this.#record(endpoint, passed);

    const outcome = await this.#attempt(endpoint, event);
    const at = this.deps.now();
    if (outcome.ok)
      return this.#record(endpoint, passed, {
        delivery: { eventId: event.id, status: "succeeded", redelivery: false, outcome, at },
      });
    // The attempts on record are this event's, unless the event they were made at has been deleted since.
    const earlier = endpoint.attemptsEventId === event.id;
    const attempts = (earlier ? endpoint.attempts : 0) + 1;
    const firstAttemptAt = (earlier ? endpoint.firstAttemptAt : null) ?? at;
    const next = nextAttemptAt(firstAttemptAt, attempts, at);
    if (next === undefined) {
      this.deps.log.warn(
        { endpointId, eventId: event.id, attempts, firstAttemptAt },
        "webhook delivery given up after three days of retries; going on to the next event",
      );
      return this.#record(endpoint, passed, {
        delivery: { eventId: event.id, status: "gave_up", redelivery: false, outcome, at },
      });
    }
    // Due later: the lease is let go and the poll that finds it due takes it again.
    await this.#record(
      endpoint,
      {
        attempts,
        attemptsEventId: event.id,
        firstAttemptAt,
        nextAttemptAt: next,
        leaseOwner: null,
        leasedUntil: null,
      },
      { delivery: { eventId: event.id, status: "failed", redelivery: false, outcome, at } },
    );
    return undefined;
  }

  /** Whether the event the endpoint's waiting attempts were at has been deleted (its wait is then over). */
  async #attemptsEventGone(endpoint: WebhookEndpointRow): Promise<boolean> {
    const [row] = await selectRows<{ gone: boolean }>(
      this.deps.db,
      sql`SELECT ${attemptsEventGone(sql`e`)} AS gone FROM ${webhookEndpoints} e WHERE e.id = ${endpoint.id}`,
    );
    return row?.gone === true;
  }

  /** The event a redelivery names, if it is still the endpoint's account's. */
  async #event(endpoint: WebhookEndpointRow, eventId: string): Promise<EventRow | undefined> {
    const [event] = await this.deps.db
      .select()
      .from(events)
      .where(and(eq(events.id, eventId), eq(events.accountId, endpoint.accountId)));
    return event;
  }

  /** Sends one event once; no database transaction is open meanwhile. */
  async #attempt(endpoint: WebhookEndpointRow, event: EventRow): Promise<AttemptOutcome> {
    const body = webhookPayload(event);
    const sentAt = this.deps.now();
    // The secrets as they stand now, not as the batch read them: a rotation counts from the next attempt.
    const [secrets] = await this.deps.db
      .select({
        current: webhookEndpoints.sealedSecret,
        previous: webhookEndpoints.sealedPreviousSecret,
        previousUntil: webhookEndpoints.previousSecretExpiresAt,
      })
      .from(webhookEndpoints)
      .where(eq(webhookEndpoints.id, endpoint.id));
    let signature: string;
    try {
      if (!secrets) throw new Error("the endpoint is gone");
      // The secret, and the one it replaced while that one still signs (a receiver moving to the new one).
      const sealed = [secrets.current];
      if (secrets.previous && secrets.previousUntil && secrets.previousUntil > sentAt)
        sealed.push(secrets.previous);
      signature = sealed
        .map((secret) =>
          new Webhook(
            this.deps.keyring.openSecret(secret, secretAssociatedData(endpoint.id)).toString("utf8"),
          ).sign(event.id, sentAt, body),
        )
        .join(" ");
    } catch {
      return { ok: false, responseStatus: null, error: "the endpoint's signing secret does not open" };
    }
    const timestamp = String(Math.floor(sentAt.getTime() / 1000));
    try {
      const response = await this.deps.outbound.fetch({
        url: endpoint.url,
        method: "POST",
        headers: {
          "content-type": "application/json",
          "user-agent": "svc-webhooks/1",
          "webhook-id": event.id,
          "webhook-timestamp": timestamp,
          "webhook-signature": signature,
        },
        body,
        // A 2xx is the acknowledgement: its body is not waited for (a large or endless one would fail the
        // attempt, and the receiver would get the event again). Of a refusal, enough to quote it.
        bodyBytes: (status) => (status >= 200 && status < 300 ? 0 : 4 * ERROR_TEXT_CHARS),
      });
      if (response.status >= 200 && response.status < 300)
        return { ok: true, responseStatus: response.status, error: null };
      const text = response.body.toString("utf8"); // already cut at bodyBytes
      return {
        ok: false,
        responseStatus: response.status,
        error: shortText(`HTTP ${response.status}${text.trim() ? `: ${text}` : ""}`),
      };
    } catch (error) {
      if (error instanceof AppError) {
        const message =
          error.reason === "too_many_redirects"
            ? "the endpoint answered with a redirect, which is not followed"
            : error.message;
        return { ok: false, responseStatus: null, error: shortText(message) };
      }
      this.deps.log.warn({ err: error, endpointId: endpoint.id }, "webhook attempt failed unexpectedly");
      return { ok: false, responseStatus: null, error: "the request could not be sent" };
    }
  }

  /**
   * Writes the endpoint's new state and what the attempt left (its log entry, the redelivery done) in one
   * statement, only while this instance still holds the lease (renewed by the write). Answers the endpoint
   * as it then stands, or undefined when another instance holds it now.
   */
  async #record(
    endpoint: WebhookEndpointRow,
    state: EndpointState,
    done: { delivery?: DeliveryRecord; redeliveryId?: bigint } = {},
  ): Promise<WebhookEndpointRow | undefined> {
    const leasedUntil = state.leasedUntil === null ? null : new Date(this.deps.now().getTime() + LEASE_MS);
    const next = { ...state, leasedUntil };
    const sets = Object.entries(next).map(
      ([field, value]) =>
        sql`${sql.identifier(STATE_COLUMNS[field as keyof EndpointState])} = ${typeof value === "bigint" ? value.toString() : value}`,
    );
    const parts = [
      sql`WITH held AS (
        UPDATE ${webhookEndpoints} SET ${sql.join(sets, sql`, `)}
        WHERE id = ${endpoint.id} AND lease_owner = ${this.owner}
        RETURNING deleted_at)`,
    ];
    const { delivery, redeliveryId } = done;
    if (delivery) {
      // The attempt's number counts every attempt at this event on this endpoint, redeliveries included.
      // An event the retention sweep deleted meanwhile (it locks what it deletes) has nothing to log it against.
      parts.push(sql`, logged AS (
        INSERT INTO ${webhookDeliveries} (endpoint_id, event_id, attempt, status, redelivery, response_status, error, at)
        SELECT ${endpoint.id}, ${delivery.eventId},
          COALESCE((SELECT max(attempt) FROM ${webhookDeliveries}
                    WHERE endpoint_id = ${endpoint.id} AND event_id = ${delivery.eventId}), 0) + 1,
          ${delivery.status}, ${delivery.redelivery}, ${delivery.outcome.responseStatus},
          ${delivery.outcome.error}, ${delivery.at ?? this.deps.now()}
        FROM held WHERE EXISTS (SELECT 1 FROM ${events} WHERE id = ${delivery.eventId} FOR KEY SHARE))`);
    }
    if (redeliveryId !== undefined) {
      parts.push(sql`, dropped AS (
        DELETE FROM ${webhookRedeliveries} WHERE id = ${redeliveryId} AND EXISTS (SELECT 1 FROM held))`);
    }
    parts.push(sql` SELECT deleted_at FROM held`);
    const [held] = await selectRows<{ deleted_at: Date | string | null }>(
      this.deps.db,
      sql.join(parts, sql``),
    );
    if (!held) {
      this.deps.log.warn(
        { endpointId: endpoint.id },
        "webhook endpoint taken over by another instance; its attempt is not recorded",
      );
      return undefined;
    }
    return {
      ...endpoint,
      ...next,
      deletedAt: held.deleted_at === null ? null : new Date(held.deleted_at),
    } as WebhookEndpointRow;
  }

  /**
   * Lets go of an endpoint's lease. `backOfLine`: it still has work due, and is leased again after the
   * endpoints that have waited longer (leases are taken by `next_attempt_at`, none first; one due later keeps
   * its time).
   */
  async #release(endpointId: string, options: { backOfLine?: boolean } = {}): Promise<void> {
    const now = this.deps.now();
    await this.deps.db
      .update(webhookEndpoints)
      .set({
        leaseOwner: null,
        leasedUntil: null,
        ...(options.backOfLine
          ? {
              nextAttemptAt: sql`CASE WHEN ${webhookEndpoints.nextAttemptAt} > ${now} THEN ${webhookEndpoints.nextAttemptAt} ELSE ${now}::timestamptz END`,
            }
          : {}),
      })
      .where(and(eq(webhookEndpoints.id, endpointId), eq(webhookEndpoints.leaseOwner, this.owner)));
  }
}

/** What a write may change of an endpoint's delivery state, and the columns that hold it. */
type EndpointState = Partial<
  Pick<
    WebhookEndpointRow,
    | "cursorTxId"
    | "cursorSeq"
    | "attempts"
    | "attemptsEventId"
    | "firstAttemptAt"
    | "nextAttemptAt"
    | "leaseOwner"
    | "leasedUntil"
  >
>;
const STATE_COLUMNS: Record<keyof EndpointState, string> = {
  cursorTxId: "cursor_tx_id",
  cursorSeq: "cursor_seq",
  attempts: "attempts",
  attemptsEventId: "attempts_event_id",
  firstAttemptAt: "first_attempt_at",
  nextAttemptAt: "next_attempt_at",
  leaseOwner: "lease_owner",
  leasedUntil: "leased_until",
};

/** One attempt's entry in the deliveries log. */
interface DeliveryRecord {
  eventId: string;
  status: "succeeded" | "failed" | "gave_up";
  redelivery: boolean;
  outcome: AttemptOutcome;
  at?: Date;
}

/** Whether a transaction was committed as of a snapshot (`pg_snapshot` text: `xmin:xmax:xip,…`). */
export function committedBefore(txId: bigint, snapshot: string): boolean {
  const [xmin = "0", xmax = "0", running = ""] = snapshot.split(":");
  if (txId < BigInt(xmin)) return true;
  if (txId >= BigInt(xmax)) return false;
  return !running
    .split(",")
    .filter(Boolean)
    .some((id) => BigInt(id) === txId);
}

function shortText(text: string): string {
  const oneLine = text.replace(/\s+/g, " ").trim();
  return oneLine.length > ERROR_TEXT_CHARS ? `${oneLine.slice(0, ERROR_TEXT_CHARS - 1)}…` : oneLine;
}

function toTextArray(values: readonly string[]): string {
  return `{${values.map((value) => `"${value}"`).join(",")}}`;
}
