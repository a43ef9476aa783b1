/**
 * EVM nonces of the wallets' addresses, handed out by the store so concurrent spends (and instances sharing
 * one PostgreSQL) never sign two transactions with one nonce, nor skip one.
 */
import { and, eq } from "drizzle-orm";
import { evmNonces } from "../internal/db/schema.ts";
import { type Db, namedStatement, type Tx } from "../internal/db/store.ts";

/**
 * Hands out the next nonce of `address` on `chain`: max(what was handed out, what the chain has seen
 * pending), then moves past it. Call it under the spend's lock, in its transaction.
 */
export async function allocateNonce(
  tx: Tx,
  chain: string,
  address: string,
  chainPendingNonce: number,
): Promise<number> {
  const [allocated] = await allocateNonceStatement(tx, [chain, address, chainPendingNonce]);
  if (!allocated) throw new Error("nonce allocation returned no row");
  return allocated.next - 1;
}

const allocateNonceStatement = namedStatement<{ next: number }>(
  "allocate_nonce",
  `INSERT INTO evm_nonces (chain, address, next_nonce) VALUES ($1, $2, $3::integer + 1)
    ON CONFLICT (chain, address) DO UPDATE SET next_nonce = greatest(evm_nonces.next_nonce, $3::integer) + 1
    RETURNING next_nonce`,
  [[["next"], evmNonces.nextNonce]],
);

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
