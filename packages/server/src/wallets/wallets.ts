import { and, desc, eq } from "drizzle-orm";
import { lockAccount } from "../accounts/accounts.ts";
import type { ChainKind, ChainRegistry } from "../chains/registry.ts";
import { recordEvent } from "../events/events.ts";
import { newId } from "../internal/crypto.ts";
import { walletKeys, walletPolicies, wallets } from "../internal/db/schema.ts";
import { type Db, namedStatement, tableColumns } from "../internal/db/store.ts";
import { errors } from "../internal/errors.ts";
import { initialPolicyRow, lockPolicyRow, type PolicyInput, type PolicyRow } from "../policy/policy.ts";
import type { Keyring } from "./keyring.ts";

export type WalletRow = typeof wallets.$inferSelect;

/** The WalletRecord of spec 2.3 with api.md's additions. */
export interface WalletView {
  id: string;
  name: string;
  chains: string[];
  evm?: { address: string };
  solana?: { address: string };
  metadata: Record<string, unknown>;
  status: "active" | "archived";
  createdAt: string;
}

export function toWalletView(row: WalletRow): WalletView {
  return {
    id: row.id,
    name: row.name,
    chains: row.chains,
    ...(row.evmAddress ? { evm: { address: row.evmAddress } } : {}),
    ...(row.solanaAddress ? { solana: { address: row.solanaAddress } } : {}),
    metadata: row.metadata,
    status: row.status,
    createdAt: row.createdAt.toISOString(),
  };
}

export interface CreateWalletInput {
  name: string;
  chains: string[];
  metadata?: Record<string, unknown> | undefined;
  policy?: PolicyInput | undefined;
}

/**
 * Creates a wallet with freshly generated keys for each kind of chain it asks for, and its policy. An
 * account holding `maxWallets` wallets (archived ones included) is refused: 409 `too_many_wallets`.
 * @example await createWallet({ db, keyring, chains, maxWallets: 1000 }, accountId, { name: "agent", chains: ["base", "solana"] });
 */
export async function createWallet(
  deps: { db: Db; keyring: Keyring; chains: ChainRegistry; maxWallets: number },
  accountId: string,
  input: CreateWalletInput,
): Promise<WalletRow> {
  const kinds = new Set<ChainKind>();
  for (const name of input.chains) {
    const chain = deps.chains.get(name);
    if (!chain) throw errors.unknownChain(name, deps.chains.names());
    kinds.add(chain.kind);
  }
  const id = newId("wal");
  const { wrappedDataKey, keys } = deps.keyring.generateWalletKeys(id, [...kinds]);
  const addressOf = (kind: ChainKind) => keys.find((key) => key.kind === kind)?.address ?? null;
  return deps.db.transaction(async (tx) => {
    await lockAccount(tx, accountId);
    if ((await tx.$count(wallets, eq(wallets.accountId, accountId))) >= deps.maxWallets) {
      throw errors.tooManyWallets(deps.maxWallets);
    }
    const [row] = await tx
      .insert(wallets)
      .values({
        id,
        accountId,
        name: input.name,
        chains: [...new Set(input.chains)],
        metadata: input.metadata ?? {},
        evmAddress: addressOf("evm"),
        solanaAddress: addressOf("solana"),
        status: "active",
        wrappedDataKey,
      })
      .returning();
    await tx.insert(walletKeys).values(
      keys.map((key) => ({
        walletId: id,
        chainKind: key.kind,
        encryptedPrivateKey: key.encryptedPrivateKey,
      })),
    );
    await tx.insert(walletPolicies).values(initialPolicyRow(id, input.policy));
    if (!row) throw errors.internal(new Error("insert returned no row"));
    return row;
  });
}

/** The account's wallets, newest first, archived ones included. */
export function listWallets(db: Db, accountId: string): Promise<WalletRow[]> {
  return db
    .select()
    .from(wallets)
    .where(eq(wallets.accountId, accountId))
    .orderBy(desc(wallets.createdAt), desc(wallets.id));
}

/** The wallet if it exists and belongs to the account; NotFound otherwise, never revealing which. */
export async function findWalletForAccount(db: Db, accountId: string, walletId: string): Promise<WalletRow> {
  const [row] = await walletForAccountStatement(db, [walletId, accountId]);
  if (!row) throw errors.walletNotFound(walletId);
  return row;
}

const walletColumns = tableColumns(wallets, [], "w");
const walletForAccountStatement = namedStatement<WalletRow>(
  "wallet_for_account",
  `SELECT ${walletColumns.list} FROM wallets w WHERE w.id = $1 AND w.account_id = $2`,
  walletColumns.fields,
);

/** A wallet's private keys as stored, sealed under its data key: one per chain kind it has. */
export type SealedKeys = Partial<Record<ChainKind, Buffer>>;

/**
 * The wallet, if it belongs to the account (NotFound otherwise), with its spending policy and its sealed
 * keys, in one read: what a spend needs before its chain calls. The policy is checked again under its lock
 * when the spend is admitted; a key is opened only to sign ({@link openSigningKey}).
 */
export async function findSpendingWallet(
  db: Db,
  accountId: string,
  walletId: string,
): Promise<{ wallet: WalletRow; policy: PolicyRow; sealedKeys: SealedKeys }> {
  const [row] = await spendingWalletStatement(db, [walletId, accountId]);
  if (!row) throw errors.walletNotFound(walletId);
  const sealedKeys: SealedKeys = {};
  if (row.evmKey) sealedKeys.evm = row.evmKey;
  if (row.solanaKey) sealedKeys.solana = row.solanaKey;
  return { wallet: row.wallet, policy: row.policy, sealedKeys };
}

const spendingWalletColumns = tableColumns(wallets, ["wallet"], "w");
const spendingPolicyColumns = tableColumns(walletPolicies, ["policy"], "p");
const spendingWalletStatement = namedStatement<{
  wallet: WalletRow;
  policy: PolicyRow;
  evmKey: Buffer | null;
  solanaKey: Buffer | null;
}>(
  "spending_wallet",
  `SELECT ${spendingWalletColumns.list}, ${spendingPolicyColumns.list},
      evm_keys.encrypted_private_key, solana_keys.encrypted_private_key
    FROM wallets w
    JOIN wallet_policies p ON p.wallet_id = w.id
    LEFT JOIN wallet_keys evm_keys ON evm_keys.wallet_id = w.id AND evm_keys.chain_kind = 'evm'
    LEFT JOIN wallet_keys solana_keys ON solana_keys.wallet_id = w.id AND solana_keys.chain_kind = 'solana'
    WHERE w.id = $1 AND w.account_id = $2`,
  [
    ...spendingWalletColumns.fields,
    ...spendingPolicyColumns.fields,
    [["evmKey"], walletKeys.encryptedPrivateKey],
    [["solanaKey"], walletKeys.encryptedPrivateKey],
  ],
);

/** Archives a wallet: it can no longer spend, and its history stays. Archiving twice is harmless. */
export async function archiveWallet(db: Db, accountId: string, walletId: string): Promise<void> {
  const wallet = await findWalletForAccount(db, accountId, walletId);
  if (wallet.status === "archived") return;
  await db.transaction(async (tx) => {
    // Locking the policy row waits for every spend's admission, which locks it too: none is half-way through.
    await lockPolicyRow(tx, walletId);
    const [archived] = await tx
      .update(wallets)
      .set({ status: "archived", archivedAt: new Date() })
      .where(and(eq(wallets.id, walletId), eq(wallets.accountId, accountId), eq(wallets.status, "active")))
      .returning();
    // Two archives raced: the one that changed the status reports it.
    if (archived) await recordEvent(tx, { walletId }, "wallet.archived", toWalletView(archived));
  });
}

/**
 * Restores an archived wallet: it spends again, under the policy it had. Archiving is a step towards safety
 * that an agent may take; this is the owner's way back (without it, an agent talked into archiving its wallet
 * would lock the funds in it for good). Restoring an active wallet changes nothing. Returns the wallet.
 */
export async function restoreWallet(db: Db, accountId: string, walletId: string): Promise<WalletRow> {
  const wallet = await findWalletForAccount(db, accountId, walletId);
  if (wallet.status === "active") return wallet;
  return db.transaction(async (tx) => {
    // The same lock as archiving and policy changes take: none of them interleaves with this one.
    await lockPolicyRow(tx, walletId);
    const [restored] = await tx
      .update(wallets)
      .set({ status: "active", archivedAt: null })
      .where(and(eq(wallets.id, walletId), eq(wallets.accountId, accountId), eq(wallets.status, "archived")))
      .returning();
    // Two restores raced: the one that changed the status reports it; the other reads what it left.
    if (!restored) return findWalletForAccount(tx, accountId, walletId);
    await recordEvent(tx, { walletId }, "wallet.restored", toWalletView(restored));
    return restored;
  });
}

/**
 * Opens the wallet's private key for one chain kind, for signing; read from the store unless the caller
 * already holds it sealed (`sealed`, from {@link findSpendingWallet}). The caller zeroes the buffer when done.
 */
export async function openSigningKey(
  db: Db,
  keyring: Keyring,
  wallet: WalletRow,
  kind: ChainKind,
  sealed: SealedKeys = {},
): Promise<Buffer> {
  let encrypted = sealed[kind];
  if (!encrypted) {
    const [row] = await db
      .select()
      .from(walletKeys)
      .where(and(eq(walletKeys.walletId, wallet.id), eq(walletKeys.chainKind, kind)));
    encrypted = row?.encryptedPrivateKey;
  }
  if (!encrypted) throw new Error(`wallet ${wallet.id} has no ${kind} key`);
  return keyring.openPrivateKey(wallet.id, kind, wallet.wrappedDataKey, encrypted);
}
