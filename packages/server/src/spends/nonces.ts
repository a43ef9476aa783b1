/**
 * EVM nonces of the wallets' addresses, handed out by the store so concurrent spends (and instances sharing
 * one PostgreSQL) never sign two transactions with one nonce, nor skip one.
 */
import { and, eq, sql } from "drizzle-orm";
import { evmNonces } from "../internal/db/schema.ts";
import type { Db, Tx } from "../internal/db/store.ts";

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
  const [allocated] = await tx
    .insert(evmNonces)
    .values({ chain, address, nextNonce: chainPendingNonce + 1 })
    .onConflictDoUpdate({
      target: [evmNonces.chain, evmNonces.address],
      set: { nextNonce: sql`greatest(${evmNonces.nextNonce}, ${chainPendingNonce}) + 1` },
    })
    .returning({ next: evmNonces.nextNonce });
  if (!allocated) throw new Error("nonce allocation returned no row");
  return allocated.next - 1;
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
