import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/** `length` characters drawn uniformly from base62 (rejection sampling, no modulo bias). */
export function randomBase62(length: number): string {
  let out = "";
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      // 248 = 62 * 4: bytes at or above it would favour the first characters.
      if (byte < 248) out += BASE62[byte % 62];
      if (out.length === length) break;
    }
  }
  return out;
}

/**
 * A new opaque, unguessable identifier with a type prefix (api.md: `usr_`, `wal_`, `key_`, `tx_`, `req_`; `evt_` events, `wh_` webhook endpoints).
 * @example newId("wal") // "wal_3kTq…"
 */
export function newId(prefix: "usr" | "wal" | "key" | "tx" | "req" | "evt" | "wh"): string {
  return `${prefix}_${randomBase62(prefix === "req" ? 16 : 22)}`;
}

export const API_KEY_PREFIX = "svc_";

/** A new API key: `svc_` and 40 base62 characters (about 238 bits). */
export function generateApiKey(): string {
  return `${API_KEY_PREFIX}${randomBase62(40)}`;
}

/** The stored form of an API key. Keys are high-entropy, so a plain SHA-256 cannot be reversed by search. */
export function hashApiKey(key: string): string {
  return createHash("sha256").update(key).digest("hex");
}

const IV_BYTES = 12;
const TAG_BYTES = 16;

/** AES-256-GCM: returns iv ‖ tag ‖ ciphertext. `associatedData` binds the ciphertext to its owner. */
export function seal(key: Buffer, plaintext: Buffer, associatedData: string): Buffer {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv("aes-256-gcm", key, iv);
  cipher.setAAD(Buffer.from(associatedData, "utf8"));
  const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), ciphertext]);
}

/** Reverses {@link seal}. Throws when the key or the associated data is not the one sealed with. */
export function open(key: Buffer, sealed: Buffer, associatedData: string): Buffer {
  const iv = sealed.subarray(0, IV_BYTES);
  const tag = sealed.subarray(IV_BYTES, IV_BYTES + TAG_BYTES);
  const decipher = createDecipheriv("aes-256-gcm", key, iv);
  decipher.setAAD(Buffer.from(associatedData, "utf8"));
  decipher.setAuthTag(tag);
  return Buffer.concat([decipher.update(sealed.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]);
}

/** A fresh 32-byte key (a wallet's data key, or a generated master key). */
export function newKey(): Buffer {
  return randomBytes(32);
}
