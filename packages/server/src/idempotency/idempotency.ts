import { createHash } from "node:crypto";
import { and, eq, sql } from "drizzle-orm";
import { idempotencyKeys } from "../internal/db/schema.ts";
import type { Db, Tx } from "../internal/db/store.ts";
import { errors } from "../internal/errors.ts";

/** A response to remember and replay: the status and the JSON body. */
export interface StoredResponse {
  status: number;
  body: unknown;
}

/**
 * Handed to the work an Idempotency-Key guards, so it can record the spend it creates. `lockedAt` says
 * which owner this is: a claim taken over by a retry has a new one, and every write by the old owner
 * (linking a spend, storing a response) then matches no row.
 */
export interface IdempotencyClaim {
  accountId: string;
  key: string;
  lockedAt: Date;
}

/** How long a duplicate waits for the first request to finish before answering `idempotency_key_in_use`. */
const WAIT_FOR_FIRST_MS = 10_000;
/** An `in_progress` claim this old belongs to a process that died; a retry takes it over. */
const STALE_CLAIM_MS = 60_000;

/** SHA-256 over the method, the path and the body with object keys sorted: the "same request" test. */
export function requestFingerprint(method: string, path: string, body: unknown): string {
  return createHash("sha256")
    .update(`${method} ${path}\n${canonicalJson(body)}`)
    .digest("hex");
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
  }
  return JSON.stringify(value ?? null);
}

/** What claiming a key found: it is ours to run, a finished request to replay, or a dead owner's spend. */
export type ClaimOutcome =
  | { kind: "owned"; claim: IdempotencyClaim }
  | { kind: "replay"; response: StoredResponse }
  /** Taken over from a process that died after recording its spend: answer from that spend, never redo it. */
  | { kind: "resume"; claim: IdempotencyClaim; transactionId: string };

/**
 * Claims an (account, Idempotency-Key) for one request. The first request owns it and runs; a repeat of a
 * finished request replays its response; a repeat with another request is refused (`idempotency_key_reused`);
 * a repeat while the first is still running waits for it, then answers `idempotency_key_in_use`. A claim
 * whose owner died is taken over by exactly one retry.
 */
export async function claimIdempotencyKey(
  db: Db,
  request: { accountId: string; key: string; fingerprint: string },
  now: () => Date = () => new Date(),
): Promise<ClaimOutcome> {
  // How long a duplicate waits is real time; how old a claim is, the service's clock.
  const deadline = Date.now() + WAIT_FOR_FIRST_MS;
  for (;;) {
    const claim: IdempotencyClaim = { accountId: request.accountId, key: request.key, lockedAt: now() };
    const inserted = await db
      .insert(idempotencyKeys)
      .values({ ...claim, requestHash: request.fingerprint, state: "in_progress" })
      .onConflictDoNothing()
      .returning({ key: idempotencyKeys.key });
    if (inserted.length > 0) return { kind: "owned", claim };

    const [existing] = await db
      .select()
      .from(idempotencyKeys)
      .where(and(eq(idempotencyKeys.accountId, claim.accountId), eq(idempotencyKeys.key, claim.key)));
    if (!existing) continue; // released between our insert and read: try again
    if (existing.requestHash !== request.fingerprint) throw errors.idempotencyKeyReused();
    if (existing.state === "completed") {
      return {
        kind: "replay",
        response: { status: existing.responseStatus ?? 200, body: storedBody(existing.responseBody) },
      };
    }
    if (now().getTime() - existing.lockedAt.getTime() > STALE_CLAIM_MS) {
      // Take over a claim whose owner died, exactly once: compare-and-set on locked_at, and only while it
      // is in progress. An owner that was slow rather than dead may have recorded its spend since the read
      // above (or finished): the row as taken over decides, never the read.
      const [taken] = await db
        .update(idempotencyKeys)
        .set({ lockedAt: claim.lockedAt })
        .where(
          and(owned({ ...claim, lockedAt: existing.lockedAt }), eq(idempotencyKeys.state, "in_progress")),
        )
        .returning({ transactionId: idempotencyKeys.transactionId });
      if (taken) {
        return taken.transactionId
          ? { kind: "resume", claim, transactionId: taken.transactionId }
          : { kind: "owned", claim };
      }
    }
    if (Date.now() > deadline) throw errors.idempotencyKeyInUse();
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * Ends an owned claim with the request's response. A success is remembered (unless its route says not to:
 * `remember: false`). So is anything once the request recorded a spend (a rejected broadcast, say): a retry
 * must not pay again. An error that moved nothing and recorded nothing (validation, policy, funds, a fault
 * before the spend) frees the key, so a retry with the same key is evaluated afresh, as if it were the first.
 * A fault (500) after the spend was recorded is not remembered either: the next retry answers from the spend.
 */
export async function finishIdempotencyClaim(
  db: Db,
  claim: IdempotencyClaim,
  response: StoredResponse,
  options: { remember?: boolean } = {},
): Promise<void> {
  if (response.status < 400 && (options.remember ?? true)) return complete(db, claim, response);
  const freed = await db
    .delete(idempotencyKeys)
    .where(and(owned(claim), sql`${idempotencyKeys.transactionId} IS NULL`))
    .returning({ key: idempotencyKeys.key });
  if (freed.length > 0) return;
  if (response.status === 500) {
    // A fault after the spend was recorded says nothing of it (the database connection lost as the spend's
    // COMMIT went out, say: it may have committed). The claim is left to the next retry at once, which
    // answers from the spend as recorded instead of this error.
    await db
      .update(idempotencyKeys)
      .set({ lockedAt: new Date(0) })
      .where(owned(claim));
    return;
  }
  await complete(db, claim, response);
}

/** The claim row, if this owner still holds it. */
function owned(claim: IdempotencyClaim) {
  return and(
    eq(idempotencyKeys.accountId, claim.accountId),
    eq(idempotencyKeys.key, claim.key),
    eq(idempotencyKeys.lockedAt, claim.lockedAt),
  );
}

async function complete(db: Db, claim: IdempotencyClaim, response: StoredResponse): Promise<void> {
  await db
    .update(idempotencyKeys)
    .set({ state: "completed", responseStatus: response.status, responseBody: JSON.stringify(response.body) })
    .where(owned(claim));
}

/**
 * A stored response body. It is kept as its JSON text (a JSON string in the column): a body may quote what
 * a paid resource answered, NUL characters and unpaired surrogates included, which a jsonb value cannot
 * hold (the answer was then never stored, and the key's retries were refused, then answered otherwise);
 * their escapes in the text are plain characters. Rows stored before hold the body itself (no response
 * body is a bare string).
 */
function storedBody(column: unknown): unknown {
  return typeof column === "string" ? JSON.parse(column) : column;
}

/**
 * Links the claim to the spend it recorded, inside the spend's own database transaction. If a retry has
 * taken the claim over meanwhile, this throws `idempotency_key_in_use`, which rolls the spend back: one key,
 * one spend.
 */
export async function attachTransaction(
  tx: Tx,
  claim: IdempotencyClaim,
  transactionId: string,
): Promise<void> {
  const linked = await tx
    .update(idempotencyKeys)
    .set({ transactionId })
    .where(and(owned(claim), sql`${idempotencyKeys.transactionId} IS NULL`))
    .returning({ key: idempotencyKeys.key });
  if (linked.length === 0) throw errors.idempotencyKeyInUse();
}

/** How long a finished Idempotency-Key is remembered at least (README: "remembered at least 24 h"). */
export const IDEMPOTENCY_KEY_KEPT_MS = 24 * 3_600_000;
/** Rows a sweep deletes per statement: short statements, whatever the backlog. */
const SWEEP_BATCH = 1_000;

/**
 * Deletes finished keys older than {@link IDEMPOTENCY_KEY_KEPT_MS}, in batches, and returns how many; the
 * table would otherwise grow by every remembered answer, for good. A key still in progress is left to its
 * owner (or to a retry's take-over).
 */
export async function sweepIdempotencyKeys(db: Db, now = new Date()): Promise<number> {
  const before = new Date(now.getTime() - IDEMPOTENCY_KEY_KEPT_MS);
  let swept = 0;
  for (;;) {
    const deleted = await db
      .delete(idempotencyKeys)
      .where(
        sql`(${idempotencyKeys.accountId}, ${idempotencyKeys.key}) IN (
          SELECT account_id, key FROM idempotency_keys
          WHERE state = 'completed' AND created_at < ${before.toISOString()}::timestamptz
          LIMIT ${SWEEP_BATCH})`,
      )
      .returning({ key: idempotencyKeys.key });
    swept += deleted.length;
    if (deleted.length < SWEEP_BATCH) return swept;
  }
}
