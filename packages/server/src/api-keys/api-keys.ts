import { and, desc, eq, inArray, isNull } from "drizzle-orm";
import { lockAccount } from "../accounts/accounts.ts";
import { recordEvent } from "../events/events.ts";
import { generateApiKey, hashApiKey, newId } from "../internal/crypto.ts";
import { apiKeys, wallets } from "../internal/db/schema.ts";
import { type Db, holdCredential, namedStatement, type Tx } from "../internal/db/store.ts";
import { errors } from "../internal/errors.ts";

/** What a key may do (api.md, "Credentials and roles"). */
export type KeyRole = "admin" | "agent" | "read";

export interface ApiKeyRecord {
  id: string;
  name: string;
  role: KeyRole;
  /** The wallets the key may see and act on; null = every wallet of the account. */
  walletIds: string[] | null;
  expiresAt: Date | null;
  createdAt: Date;
  lastUsedAt: Date | null;
}

export interface CreateApiKeyInput {
  name: string;
  role: KeyRole;
  walletIds?: string[] | undefined;
  expiresAt?: Date | undefined;
}

/** The API key record on the wire (spec 2.6 with api.md's role fields); never the key itself. */
export function toApiKeyView(record: ApiKeyRecord) {
  return {
    id: record.id,
    name: record.name,
    role: record.role,
    walletIds: record.walletIds,
    expiresAt: record.expiresAt?.toISOString() ?? null,
    createdAt: record.createdAt.toISOString(),
    lastUsed: record.lastUsedAt?.toISOString() ?? null,
  };
}

const recordColumns = {
  id: apiKeys.id,
  name: apiKeys.name,
  role: apiKeys.role,
  walletIds: apiKeys.walletIds,
  expiresAt: apiKeys.expiresAt,
  createdAt: apiKeys.createdAt,
  lastUsedAt: apiKeys.lastUsedAt,
};

/** `lastUsed` is written at most this often per key; api.md allows it to be a few seconds late. */
const LAST_USED_RESOLUTION_MS = 5_000;

/**
 * Creates an API key. The full key is in the result and nowhere else: only its hash is stored. Every wallet
 * named in `walletIds` must be the account's (NotFound otherwise, as for any wallet it does not own). An
 * account holding `maxKeys` keys that are not revoked (expired ones included) is refused: 409
 * `too_many_api_keys`.
 * @example const { key } = await createApiKey({ db, maxKeys: 100 }, accountId, { name: "agent-1", role: "agent", walletIds: [walletId] });
 */
export async function createApiKey(
  { db, maxKeys }: { db: Db; maxKeys: number },
  accountId: string,
  input: CreateApiKeyInput,
): Promise<ApiKeyRecord & { key: string }> {
  const walletIds = input.walletIds ? [...new Set(input.walletIds)] : null;
  if (walletIds) {
    const owned = await db
      .select({ id: wallets.id })
      .from(wallets)
      .where(and(eq(wallets.accountId, accountId), inArray(wallets.id, walletIds)));
    const ownedIds = new Set(owned.map((wallet) => wallet.id));
    const missing = walletIds.find((id) => !ownedIds.has(id));
    if (missing !== undefined) throw errors.walletNotFound(missing);
  }
  const key = generateApiKey();
  const row = await db.transaction(async (tx) => {
    await lockAccount(tx, accountId);
    const held = await tx.$count(apiKeys, and(eq(apiKeys.accountId, accountId), isNull(apiKeys.revokedAt)));
    if (held >= maxKeys) throw errors.tooManyApiKeys(maxKeys);
    const [inserted] = await tx
      .insert(apiKeys)
      .values({
        id: newId("key"),
        accountId,
        name: input.name,
        keyHash: hashApiKey(key),
        role: input.role,
        walletIds,
        expiresAt: input.expiresAt ?? null,
      })
      .returning(recordColumns);
    if (!inserted) throw errors.internal(new Error("insert returned no row"));
    await recordEvent(tx, { accountId }, "api_key.created", toApiKeyView(inserted));
    return inserted;
  });
  return { ...row, key };
}

/**
 * The account's keys that are not revoked, newest first. Expired keys stay listed (their `expiresAt` tells)
 * so that the owner sees them and can revoke them for good.
 */
export async function listApiKeys(db: Db, accountId: string): Promise<ApiKeyRecord[]> {
  return await db
    .select(recordColumns)
    .from(apiKeys)
    .where(and(eq(apiKeys.accountId, accountId), isNull(apiKeys.revokedAt)))
    .orderBy(desc(apiKeys.createdAt), desc(apiKeys.id));
}

/** One key of the account by id, revoked or not; NotFound for another account's or an unknown key. */
export async function getApiKey(db: Db, accountId: string, keyId: string): Promise<ApiKeyRecord> {
  const [row] = await db
    .select(recordColumns)
    .from(apiKeys)
    .where(and(eq(apiKeys.accountId, accountId), eq(apiKeys.id, keyId)));
  if (!row) throw errors.apiKeyNotFound(keyId);
  return row;
}

/**
 * Revokes a key for good. Revoking a key that is already revoked succeeds and keeps the first revocation's
 * time, so a retried DELETE answers as the first did; unknown keys and other accounts' keys are NotFound.
 * `alsoInTransaction` runs in the revocation's transaction when this call is the one that revoked the key
 * (ending the spends it holds, say); its result is returned, undefined when the key was revoked before.
 */
export async function revokeApiKey<T = undefined>(
  db: Db,
  accountId: string,
  keyId: string,
  options: { alsoInTransaction?: (tx: Tx, revokedAt: Date) => Promise<T>; now?: Date } = {},
): Promise<T | undefined> {
  const ofAccount = and(eq(apiKeys.id, keyId), eq(apiKeys.accountId, accountId));
  const revoked = await db.transaction(async (tx) => {
    // Only the account's own key is waited for: another account's key id locks nothing.
    const [own] = await tx.select({ id: apiKeys.id }).from(apiKeys).where(ofAccount);
    if (!own) return undefined;
    // Spends the key is being admitted for end first; those it asks for later wait, and find it revoked.
    await holdCredential(tx, keyId, "exclusive");
    const now = options.now ?? new Date();
    const [record] = await tx
      .update(apiKeys)
      .set({ revokedAt: now })
      .where(and(ofAccount, isNull(apiKeys.revokedAt)))
      .returning(recordColumns);
    if (!record) return undefined;
    await recordEvent(tx, { accountId }, "api_key.revoked", toApiKeyView(record));
    return { also: await options.alsoInTransaction?.(tx, now) };
  });
  if (revoked) return revoked.also;
  const [existing] = await db.select({ id: apiKeys.id }).from(apiKeys).where(ofAccount);
  if (!existing) throw errors.apiKeyNotFound(keyId);
  return undefined;
}

/**
 * Refuses a key revoked (or expired) since its request was authenticated, 401 as its next request would be.
 * The guards ask once the request's body has arrived (a client may take its time sending it). With `hold`,
 * inside a spend's transaction, the key is held ({@link holdCredential}) until it ends: a revocation that
 * comes after waits for the spend, so what the key spent was decided before the revocation answered, and a
 * spend that comes after the revocation waits for it.
 */
export async function ensureApiKeyLive(
  db: Db | Tx,
  keyId: string,
  at: Date,
  options: { hold?: boolean } = {},
): Promise<void> {
  // Held first, read after: a revocation that held the key before has committed, and this read sees it.
  if (options.hold) await holdCredential(db, keyId, "shared");
  const [row] = await db
    .select({ revokedAt: apiKeys.revokedAt, expiresAt: apiKeys.expiresAt })
    .from(apiKeys)
    .where(eq(apiKeys.id, keyId));
  refuseUnlessLive(row, at);
}

function refuseUnlessLive(
  key: { revokedAt: Date | null; expiresAt: Date | null } | undefined,
  at: Date,
): asserts key {
  if (!key) throw errors.invalidCredentials();
  if (key.revokedAt) throw errors.keyRevoked();
  if (key.expiresAt && key.expiresAt.getTime() <= at.getTime()) throw errors.keyExpired();
}

/** An authenticated key: whose it is, and what it may do. */
export interface KeyGrant {
  accountId: string;
  keyId: string;
  role: KeyRole;
  walletIds: string[] | null;
}

/**
 * Resolves an API key to the account that owns it and what it may do, reading the store every time so that
 * a revocation made by any instance takes effect on the next request.
 */
export async function authenticateApiKey(db: Db, key: string, at = new Date()): Promise<KeyGrant> {
  const [row] = await keyByHashStatement(db, [hashApiKey(key)]);
  refuseUnlessLive(row, at);
  const now = at.getTime();
  const lastWritten = Math.max(row.lastUsedAt?.getTime() ?? 0, lastUsedWrites.get(row.id) ?? 0);
  if (now - lastWritten >= LAST_USED_RESOLUTION_MS) {
    // Remembered before the write so that concurrent requests with this key do not all write the same row.
    lastUsedWrites.set(row.id, now);
    await db
      .update(apiKeys)
      .set({ lastUsedAt: new Date(now) })
      .where(eq(apiKeys.id, row.id));
  }
  return { accountId: row.accountId, keyId: row.id, role: row.role, walletIds: row.walletIds };
}

/** When this process last wrote each key's `lastUsed`; pruned as it grows. */
const lastUsedWrites = new Map<string, number>();
setInterval(() => {
  const cutoff = Date.now() - LAST_USED_RESOLUTION_MS;
  for (const [id, at] of lastUsedWrites) if (at < cutoff) lastUsedWrites.delete(id);
}, 60_000).unref();

/** The lookup behind every API-key request. */
const keyByHashStatement = namedStatement<{
  id: string;
  accountId: string;
  revokedAt: Date | null;
  lastUsedAt: Date | null;
  role: KeyRole;
  walletIds: string[] | null;
  expiresAt: Date | null;
}>(
  "api_key_by_hash",
  "SELECT id, account_id, revoked_at, last_used_at, role, wallet_ids, expires_at FROM api_keys WHERE key_hash = $1",
  [
    [["id"], apiKeys.id],
    [["accountId"], apiKeys.accountId],
    [["revokedAt"], apiKeys.revokedAt],
    [["lastUsedAt"], apiKeys.lastUsedAt],
    [["role"], apiKeys.role],
    [["walletIds"], apiKeys.walletIds],
    [["expiresAt"], apiKeys.expiresAt],
  ],
);
