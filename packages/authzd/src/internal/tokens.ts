import { createHash, randomBytes, randomUUID } from "node:crypto";

/**
 * Mints a bearer token: a prefix and 256 random bits. Tokens are high-entropy, so a plain SHA-256 is
 * a sufficient stored form (no password hashing needed) and keeps the per-request lookup cheap.
 *
 * @example
 * mintToken("azd"); // "azd_3q2…"
 */
export function mintToken(prefix: string): string {
  return `${prefix}_${randomBytes(32).toString("base64url")}`;
}

/**
 * Hex SHA-256 of a token: the only form in which tokens are stored or compared.
 *
 * @example
 * tokenSha256("azd_x").length; // 64
 */
export function tokenSha256(token: string): string {
  return createHash("sha256").update(token, "utf8").digest("hex");
}

/** A fresh decision id: `dec_` and 32 hex digits (122 random bits). */
export function newDecisionId(): string {
  return `dec_${randomUUID().replaceAll("-", "")}`;
}

/** A fresh settlement receipt id: `rcp_` and 32 hex digits. */
export function newReceiptId(): string {
  return `rcp_${randomUUID().replaceAll("-", "")}`;
}
