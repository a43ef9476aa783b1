import { hash } from "node:crypto";
import { canonicalJson, type JsonValue } from "./canonical.ts";

/** `prev` of the first row: there is no previous row. */
export const GENESIS_HASH = "0".repeat(64);

/** Verdict on one authorization request (spec 2.9 facts plus the outcome). */
export interface SpendDecidedFields {
  kind: "spend_authorization_decided";
  provider: string;
  network: string;
  asset: string;
  amount: string;
  per_call_cap: string;
  credits: number;
  destination: string;
  approved: boolean;
  reason: string | null;
  decision_id: string;
  payer: string;
  /**
   * When the reservation lapses (ISO 8601), as the reservation time configured then made it. Replayed as
   * written, so a restart with another reservation time neither revives a lapsed decision nor lapses a
   * held one. Rows written before it existed lack it: their expiry is worked out with the time configured now.
   */
  expires_at?: string;
}

/** Settlement of an approved decision: its credits move from reserved to spent. */
export interface SpendSettledFields {
  kind: "spend_settled";
  decision_id: string;
  receipt_id: string;
  payer: string;
  provider: string;
  network: string;
  asset: string;
  amount: string;
  credits: number;
  tx_sig: string | null;
}

/**
 * Cancellation of an approved, unsettled decision by its payer (the spend was never made): its
 * credits stop counting and it can no longer be settled.
 */
export interface SpendCancelledFields {
  kind: "spend_cancelled";
  decision_id: string;
  payer: string;
}

/**
 * The wallet service (an identity with `wallet.spend.verify`, the `consumer`) took an approved decision
 * for the one spend it admits, before signing it. From then on the payer can no longer cancel it; it is
 * settled as usual, or given back by the consumer ({@link SpendReleasedFields}).
 */
export interface SpendConsumedFields {
  kind: "spend_consumed";
  decision_id: string;
  payer: string;
  consumer: string;
}

/**
 * The consumer gave a consumed decision back: the spend was refused before anything was signed. Its
 * credits stop counting, as on a cancellation, and it can be neither consumed again nor settled.
 */
export interface SpendReleasedFields {
  kind: "spend_released";
  decision_id: string;
  payer: string;
  consumer: string;
}

/** A named identity and the SHA-256 of its bearer token (the token itself is never stored). */
export interface IdentityCreatedFields {
  kind: "identity_created";
  name: string;
  token_sha256: string;
  /** Own budget in credits per window; `null` uses the daemon default. */
  budget_credits: number | null;
  /**
   * Highest `per_call_cap` the identity may ask for (atomic units); `null` uses the daemon default.
   * Absent on rows written before ceilings existed (read as `null`).
   */
  max_per_call_cap?: string | null;
}

export interface CapabilityGrantedFields {
  kind: "capability_granted";
  identity: string;
  capability: string;
  expires_at: string | null;
}

export interface CapabilityRevokedFields {
  kind: "capability_revoked";
  identity: string;
  capability: string;
}

/** Written when start-up cut a torn last line off the log (after a crash mid-write). */
export interface AuditRepairedFields {
  kind: "audit_repaired";
  torn_bytes: number;
  torn_sha256: string;
  quarantine_file: string;
}

/** The kind-specific part of a row, before the log gives it `seq`, `prev` and `time`. */
export type RowFields =
  | SpendDecidedFields
  | SpendSettledFields
  | SpendCancelledFields
  | SpendConsumedFields
  | SpendReleasedFields
  | IdentityCreatedFields
  | CapabilityGrantedFields
  | CapabilityRevokedFields
  | AuditRepairedFields;

/** A row as stored: position in the chain, hash of the previous row, time of the event. */
export type AuditRow = RowFields & { seq: number; prev: string; time: string };

/**
 * Encodes a row as one log line: `{"hash":"<sha256 hex>","row":<canonical JSON>}` and a newline.
 * The hash covers the canonical bytes of the row, which include `prev`, so every row commits to
 * the whole chain before it.
 *
 * @example
 * const { line, hash } = encodeRow({ kind: "capability_revoked", identity: "a", capability: "c",
 *   seq: 0, prev: GENESIS_HASH, time: new Date().toISOString() });
 */
export function encodeRow(row: AuditRow): { line: string; hash: string } {
  const body = canonicalJson(row as unknown as JsonValue);
  const digest = hash("sha256", body, "hex");
  return { line: `${LINE_PREFIX}${digest}${LINE_MIDDLE}${body}}\n`, hash: digest };
}

/** Fixed framing of a line, so a verifier can slice the hash and body without parsing. */
export const LINE_PREFIX = '{"hash":"';
export const LINE_MIDDLE = '","row":';
/** Byte offset of the row body within a line. */
export const BODY_OFFSET = LINE_PREFIX.length + 64 + LINE_MIDDLE.length;
