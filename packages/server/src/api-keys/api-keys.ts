import { and, desc, eq, isNull, sql } from "drizzle-orm";
import { generateApiKey, hashApiKey, newId } from "../internal/crypto.ts";
import { apiKeys } from "../internal/db/schema.ts";
import { type Db, preparedPerDb } from "../internal/db/store.ts";
import { errors } from "../internal/errors.ts";

export interface ApiKeyRecord {
  id: string;
  name: string;
  createdAt: Date;
  lastUsedAt: Date | null;
}

/** `lastUsed` is written at most this often per key; api.md allows it to be a few seconds late. */
const LAST_USED_RESOLUTION_MS = 5_000;

/**
 * Creates an API key. The full key is in the result and nowhere else: only its hash is stored.
 * @example const { key } = await createApiKey(db, accountId, "ci");
 */
export async function createApiKey(
  db: Db,
  accountId: string,
  name: string,
): Promise<ApiKeyRecord & { key: string }> {
  const key = generateApiKey();
  const [row] = await db
    .insert(apiKeys)
    .values({ id: newId("key"), accountId, name, keyHash: hashApiKey(key) })
    .returning();
  if (!row) throw errors.internal(new Error("insert returned no row"));
  return { id: row.id, name: row.name, createdAt: row.createdAt, lastUsedAt: row.lastUsedAt, key };
}

/** The account's keys that still work, newest first. */
export async function listApiKeys(db: Db, accountId: string): Promise<ApiKeyRecord[]> {
  return db
    .select({
      id: apiKeys.id,
      name: apiKeys.name,
      createdAt: apiKeys.createdAt,
      lastUsedAt: apiKeys.lastUsedAt,
    })
    .from(apiKeys)
    .where(and(eq(apiKeys.accountId, accountId), isNull(apiKeys.revokedAt)))
    .orderBy(desc(apiKeys.createdAt), desc(apiKeys.id));
}

/** Revokes a key for good. Unknown, already revoked, and other accounts' keys are all NotFound. */
export async function revokeApiKey(db: Db, accountId: string, keyId: string): Promise<void> {
  const revoked = await db
    .update(apiKeys)
    .set({ revokedAt: new Date() })
    .where(and(eq(apiKeys.id, keyId), eq(apiKeys.accountId, accountId), isNull(apiKeys.revokedAt)))
    .returning({ id: apiKeys.id });
  if (revoked.length === 0) throw errors.apiKeyNotFound(keyId);
}

/**
 * Resolves an API key to the account that owns it, reading the store every time so that a revocation made
 * by any instance takes effect on the next request.
 */
export async function authenticateApiKey(db: Db, key: string): Promise<{ accountId: string; keyId: string }> {
  const [row] = await keyByHashQuery(db).execute({ keyHash: hashApiKey(key) });
  if (!row) throw errors.invalidCredentials();
  if (row.revokedAt) throw errors.keyRevoked();
  const now = Date.now();
  const lastWritten = Math.max(row.lastUsedAt?.getTime() ?? 0, lastUsedWrites.get(row.id) ?? 0);
  if (now - lastWritten >= LAST_USED_RESOLUTION_MS) {
    // Remembered before the write so that concurrent requests with this key do not all write the same row.
    lastUsedWrites.set(row.id, now);
    await db
      .update(apiKeys)
      .set({ lastUsedAt: new Date(now) })
      .where(eq(apiKeys.id, row.id));
  }
  return { accountId: row.accountId, keyId: row.id };
}

/** When this process last wrote each key's `lastUsed`; pruned as it grows. */
const lastUsedWrites = new Map<string, number>();
setInterval(() => {
  const cutoff = Date.now() - LAST_USED_RESOLUTION_MS;
  for (const [id, at] of lastUsedWrites) if (at < cutoff) lastUsedWrites.delete(id);
}, 60_000).unref();

/** The lookup behind every API-key request, prepared once per store (no query building, a cached plan). */
const keyByHashQuery = preparedPerDb((db) =>
  db
    .select({
      id: apiKeys.id,
      accountId: apiKeys.accountId,
      revokedAt: apiKeys.revokedAt,
      lastUsedAt: apiKeys.lastUsedAt,
    })
    .from(apiKeys)
    .where(eq(apiKeys.keyHash, sql.placeholder("keyHash")))
    .prepare("api_key_by_hash"),
);
