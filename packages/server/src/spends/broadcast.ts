import { and, eq, inArray, isNull } from "drizzle-orm";
import { BlockhashNotFoundError, ChainUnavailableError, NonceTakenError } from "../chains/errors.ts";
import type { ChainClient, SignedTransfer } from "../chains/types.ts";
import { transactions, wallets } from "../internal/db/schema.ts";
import type { Db, Tx } from "../internal/db/store.ts";
import { recordTransaction, type TransactionRow } from "../transactions/transactions.ts";
import { openSigningKey } from "../wallets/wallets.ts";
import { failSpend, signedColumns } from "./admission.ts";
import { lockNonces, releaseNonce } from "./nonces.ts";
import type { SpendDeps } from "./send.ts";
import { broadcastTransfer } from "./transfer.ts";

/**
 * Broadcasts a recorded spend (recorded as broadcast by the write that recorded it signed; a re-broadcast
 * is claimed first: {@link claimRebroadcast}). A definite rejection fails the spend (releasing its
 * reservation and its nonce); an unreachable node, or a rejection that does not prove the transaction can
 * never land, leaves it pending for the confirmer, which re-broadcasts it or decides from the chain's own
 * record; `onUnclear` is told of such an answer.
 */
export async function broadcastRecorded(
  deps: Pick<SpendDeps, "db" | "keyring" | "chainClient">,
  client: ChainClient,
  row: TransactionRow,
  onUnclear?: (error: unknown) => void,
): Promise<void> {
  if (!row.rawTx || !row.txHash) return;
  try {
    await broadcastTransfer(client, { txHash: row.txHash, raw: row.rawTx }, async (reason) => {
      // Only the caller that moved the row to failed gives its nonce back (or fills it): never two.
      const failedHere = await failSpend(deps.db, row.id, `broadcast rejected: ${reason}`);
      if (
        failedHere &&
        row.nonce !== null &&
        !(await releaseNonce(deps.db, row.chain, row.fromAddress, row.nonce))
      ) {
        // The refusal stays the answer whatever filling meets (a node gone meanwhile): a gap left
        // unfilled here is found and filled by the confirmer.
        await fillNonceGap(deps, client, { ...row, nonce: row.nonce }).catch(() => {});
      }
    });
  } catch (error) {
    if (!isInconclusive(error)) throw error;
    onUnclear?.(error);
  }
}

/**
 * A later nonce was already handed out, so the rejected one would stall every send after it: spend it on a
 * zero-value transfer to the wallet itself. Its gas is money moved, so it is recorded like any send.
 *
 * The filler is signed first (its fees read from the chain), then recorded only under the lock of the
 * address's nonces and only while no live transaction of the address holds that nonce: two callers that
 * found the same gap at once (a request's rejected broadcast, another instance's confirmer) fill it once.
 */
export async function fillNonceGap(
  deps: Pick<SpendDeps, "db" | "keyring" | "chainClient">,
  client: ChainClient,
  rejected: Pick<TransactionRow, "walletId" | "chain" | "fromAddress"> & { nonce: number },
): Promise<void> {
  const nonce = rejected.nonce;
  const [wallet] = await deps.db.select().from(wallets).where(eq(wallets.id, rejected.walletId));
  if (!wallet) return;
  const native = client.config.nativeToken;
  const plan = await client.planTransfer({
    from: rejected.fromAddress,
    to: rejected.fromAddress,
    token: native,
    amount: 0n,
  });
  const privateKey = await openSigningKey(deps.db, deps.keyring, wallet, "evm");
  let signed: SignedTransfer;
  try {
    signed = await client.signTransfer(plan, privateKey, nonce);
  } finally {
    privateKey.fill(0);
  }
  const recorded = await deps.db.transaction(async (tx) => {
    await lockNonces(tx, rejected.chain, rejected.fromAddress);
    if (await nonceHeld(tx, { ...rejected, nonce })) return false;
    await recordTransaction(tx, {
      walletId: rejected.walletId,
      type: "send",
      chain: rejected.chain,
      token: native.symbol,
      amountAtomic: 0n,
      decimals: native.decimals,
      fromAddress: rejected.fromAddress,
      toAddress: rejected.fromAddress,
      status: "pending",
      usdMicros: 0n,
      ...signedColumns({}, signed),
    });
    return true;
  });
  // If this broadcast is lost too, the confirmer re-sends the recorded filler.
  if (recorded) await broadcastTransfer(client, signed).catch(() => {});
}

/** Whether a live (pending or confirmed) transaction of the wallet's address on the chain holds `nonce`. */
async function nonceHeld(
  tx: Tx,
  spend: Pick<TransactionRow, "walletId" | "chain" | "fromAddress"> & { nonce: number },
): Promise<boolean> {
  const [held] = await tx
    .select({ id: transactions.id })
    .from(transactions)
    .where(
      and(
        eq(transactions.walletId, spend.walletId),
        eq(transactions.chain, spend.chain),
        eq(transactions.fromAddress, spend.fromAddress),
        eq(transactions.nonce, spend.nonce),
        inArray(transactions.status, ["pending", "confirmed"]),
      ),
    )
    .limit(1);
  return held !== undefined;
}

/**
 * Claims the re-broadcast of a pending transfer: moves its broadcast time from the one the caller read to
 * now (so the next re-broadcast waits again), unless another caller (another instance's confirmer) moved it
 * first or the spend settled meanwhile; then it answers false and the caller sends nothing.
 */
export async function claimRebroadcast(
  db: Db,
  row: Pick<TransactionRow, "id" | "broadcastAt">,
): Promise<boolean> {
  const claimed = await db
    .update(transactions)
    .set({ broadcastAt: new Date() })
    .where(
      and(
        eq(transactions.id, row.id),
        eq(transactions.status, "pending"),
        row.broadcastAt === null
          ? isNull(transactions.broadcastAt)
          : eq(transactions.broadcastAt, row.broadcastAt),
      ),
    )
    .returning({ id: transactions.id });
  return claimed.length > 0;
}

/**
 * Failures that do not prove the transaction can never land: no answer (it may have reached the node), a
 * lagging node that does not know the blockhash yet, a nonce already taken (perhaps by this very
 * transaction). The confirmer decides later, from the chain's own record.
 */
function isInconclusive(error: unknown): boolean {
  return (
    error instanceof ChainUnavailableError ||
    error instanceof BlockhashNotFoundError ||
    error instanceof NonceTakenError
  );
}
