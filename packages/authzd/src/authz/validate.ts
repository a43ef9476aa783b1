import type { SpendCancelledFields, SpendDecidedFields, SpendSettledFields } from "../audit/rows.ts";
import { ATOMIC_AMOUNT } from "../internal/config.ts";

/** Body of `POST /spend/authorize` (spec 2.9): the facts its audit row records. */
export type AuthorizeRequest = Pick<
  SpendDecidedFields,
  "provider" | "network" | "asset" | "amount" | "per_call_cap" | "credits" | "destination"
>;

/** Body of `POST /spend/settle`: the decision and the same facts that were authorized. */
export type SettleRequest = Pick<
  SpendSettledFields,
  "decision_id" | "provider" | "network" | "asset" | "amount" | "credits"
> & { tx_sig?: string | null };

/** Body of `POST /spend/cancel`: the decision whose spend was never made. */
export type CancelRequest = Pick<SpendCancelledFields, "decision_id">;

/** A parsed value, or the reason it was rejected (safe to return to the client). */
export type Parsed<T> = { ok: true; value: T } | { ok: false; error: string };

type Check = (value: unknown) => string | null;

const CAIP2 = /^[-a-z0-9]{3,8}:[-_a-zA-Z0-9]{1,32}$/;
const TOKENISH = /^[\x21-\x7e]{1,256}$/;
const DECISION_ID = /^dec_[0-9a-f]{32}$/;

const text =
  (what: string): Check =>
  (value) =>
    typeof value === "string" && TOKENISH.test(value)
      ? null
      : `must be a non-empty string of at most 256 printable ASCII characters without spaces (${what})`;

const network: Check = (value) =>
  typeof value === "string" && CAIP2.test(value)
    ? null
    : 'must be a CAIP-2 chain id "namespace:reference", e.g. "eip155:8453"';

const atomic: Check = (value) =>
  typeof value === "string" && ATOMIC_AMOUNT.test(value)
    ? null
    : 'must be a decimal string of atomic units without sign, fraction or leading zeros, e.g. "1500000"';

const credits: Check = (value) =>
  typeof value === "number" && Number.isSafeInteger(value) && value >= 0
    ? null
    : "must be a non-negative integer";

// A spend that costs no credits would pass every budget; an authorization must cost at least one.
// (Settlement keeps accepting 0 so that decisions logged before this rule can still be settled.)
const positiveCredits: Check = (value) =>
  typeof value === "number" && Number.isSafeInteger(value) && value >= 1
    ? null
    : "must be an integer of at least 1";

const decisionId: Check = (value) =>
  typeof value === "string" && DECISION_ID.test(value)
    ? null
    : 'must be a decision id ("dec_" and 32 hex digits)';

const AUTHORIZE_FIELDS: Record<string, Check> = {
  provider: text("provider tag"),
  network,
  asset: text("asset address"),
  amount: atomic,
  per_call_cap: atomic,
  credits: positiveCredits,
  destination: text("payee address"),
};

const SETTLE_FIELDS: Record<string, Check> = {
  decision_id: decisionId,
  provider: text("provider tag"),
  network,
  asset: text("asset address"),
  amount: atomic,
  credits,
};

const CANCEL_FIELDS: Record<string, Check> = { decision_id: decisionId };

// The wallet service passes on whatever decision id its client sent; an id of another shape is simply
// not found (404, as the lookup answers), so only the type is checked here.
const REFERENCE_FIELDS: Record<string, Check> = {
  decision_id: (value) =>
    typeof value === "string" && value.length <= 256 ? null : "must be a string of at most 256 characters",
};

const SETTLE_OPTIONAL: Record<string, Check> = { tx_sig: text("transaction signature") };

function parseObject<T>(
  body: unknown,
  required: Record<string, Check>,
  optional: Record<string, Check> = {},
): Parsed<T> {
  if (body === null || typeof body !== "object" || Array.isArray(body)) {
    return { ok: false, error: "body must be a JSON object" };
  }
  const record = body as Record<string, unknown>;
  for (const key of Object.keys(record)) {
    if (!Object.hasOwn(required, key) && !Object.hasOwn(optional, key)) {
      return { ok: false, error: `unknown field ${JSON.stringify(key)}` };
    }
  }
  for (const [key, check] of Object.entries(required)) {
    if (!Object.hasOwn(record, key)) return { ok: false, error: `${key} is required` };
    const problem = check(record[key]);
    if (problem !== null) return { ok: false, error: `${key} ${problem}` };
  }
  for (const [key, check] of Object.entries(optional)) {
    // An optional field sent as null is taken as absent.
    if (!Object.hasOwn(record, key) || record[key] === null) continue;
    const problem = check(record[key]);
    if (problem !== null) return { ok: false, error: `${key} ${problem}` };
  }
  return { ok: true, value: record as T };
}

/**
 * Validates an authorize body strictly: every field present and well-formed, no unknown fields.
 *
 * @example
 * parseAuthorizeRequest({ provider: "svc", network: "eip155:8453", asset: "0xa0b8", amount: "5",
 *   per_call_cap: "10", credits: 1, destination: "0xd00d" }).ok; // true
 */
export function parseAuthorizeRequest(body: unknown): Parsed<AuthorizeRequest> {
  return parseObject<AuthorizeRequest>(body, AUTHORIZE_FIELDS);
}

/**
 * Validates a settle body strictly; `tx_sig` is the only optional field (null counts as absent).
 *
 * @example
 * parseSettleRequest({ decision_id: "dec_…", provider: "svc", network: "eip155:8453", asset: "0xa0b8",
 *   amount: "5", credits: 1 });
 */
export function parseSettleRequest(body: unknown): Parsed<SettleRequest> {
  return parseObject<SettleRequest>(body, SETTLE_FIELDS, SETTLE_OPTIONAL);
}

/**
 * Validates a cancel body strictly: `{ decision_id }` and nothing else.
 *
 * @example
 * parseCancelRequest({ decision_id: "dec_0123456789abcdef0123456789abcdef" }).ok; // true
 */
export function parseCancelRequest(body: unknown): Parsed<CancelRequest> {
  return parseObject<CancelRequest>(body, CANCEL_FIELDS);
}

/**
 * Validates a consume or release body: `{ decision_id }` (any string; one not shaped like a decision id
 * is then not found) and nothing else.
 *
 * @example
 * parseDecisionReference({ decision_id: "dec_totally_made_up" }).ok; // true
 */
export function parseDecisionReference(body: unknown): Parsed<CancelRequest> {
  return parseObject<CancelRequest>(body, REFERENCE_FIELDS);
}

/**
 * Whether `value` has the shape of a decision id (`dec_` and 32 hex digits).
 *
 * @example
 * isDecisionId("dec_0123456789abcdef0123456789abcdef"); // true
 */
export function isDecisionId(value: string): boolean {
  return DECISION_ID.test(value);
}

/**
 * Compares two canonical atomic decimal strings (no leading zeros) without BigInt.
 *
 * @example
 * atomicGreater("1000", "999"); // true
 */
export function atomicGreater(a: string, b: string): boolean {
  return a.length !== b.length ? a.length > b.length : a > b;
}
