/**
 * EVM nonces of the wallets' addresses, handed out by the store so concurrent spends (and instances sharing
 * one PostgreSQL) never sign two transactions with one nonce, nor skip one.
 */
import { and, eq, inArray } from "drizzle-orm";
import { evmNonces } from "../internal/db/schema.ts";
import type { Db, Tx } from "../internal/db/store.ts";

/**
 * The SQL text that hands out the next nonce of an address on a chain: max(what was handed out, what the
 * chain has seen pending), then moves past it. An INSERT … SELECT from `source` (it hands out one nonce for
 * each row `source` gives, none when it gives none), with the chain, the address and the chain's pending
 * nonce as parameters `$first` to `$first + 2`; it returns `next_nonce`, one past the nonce handed out.
 * Run it under the spend's lock, in its transaction: the policy lock's statement embeds it
 * (`lockSpendingPolicy`), so that its source is the locked row and it runs once the lock is held.
 */
export function allocateNonceSql(source: string, first: number): string {
  return `INSERT INTO evm_nonces (chain, address, next_nonce)
      SELECT $${first}, $${first + 1}, $${first + 2}::integer + 1 FROM ${source}
    ON CONFLICT (chain, address) DO UPDATE SET next_nonce = greatest(evm_nonces.next_nonce, $${first + 2}::integer) + 1
    RETURNING next_nonce`;
}

/**
 * Locks the nonces of an address on a chain (its `evm_nonces` row) until the transaction ends: what hands
 * them out, gives one back or fills a gap holds it.
 */
export async function lockNonces(tx: Tx, chain: string, address: string): Promise<void> {
  await tx
    .select({ next: evmNonces.nextNonce })
    .from(evmNonces)
    .where(and(eq(evmNonces.chain, chain), eq(evmNonces.address, address)))
    .for("update");
}

/**
 * Gives back a nonce whose transaction never reached the chain, when no later nonce was handed out since.
 * Returns false when a later one was: the caller must then fill the gap on chain.
 */
export async function releaseNonce(
  db: Db | Tx,
  chain: string,
  address: string,
  nonce: number,
): Promise<boolean> {
  const released = await db
    .update(evmNonces)
    .set({ nextNonce: nonce })
    .where(
      and(eq(evmNonces.chain, chain), eq(evmNonces.address, address), eq(evmNonces.nextNonce, nonce + 1)),
    )
    .returning({ next: evmNonces.nextNonce });
  return released.length > 0;
}

/** Forgets every nonce handed out on `chains`: chains started anew, where every address begins again at 0. */
export async function forgetNonces(db: Db | Tx, chains: readonly string[]): Promise<void> {
  await db.delete(evmNonces).where(inArray(evmNonces.chain, [...chains]));
}
