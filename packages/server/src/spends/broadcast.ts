import { eq } from "drizzle-orm";
import { isUnreachable } from "../chains/errors.ts";
import type { ChainClient } from "../chains/types.ts";
import { transactions, wallets } from "../internal/db/schema.ts";
import type { Db } from "../internal/db/store.ts";
import { errors } from "../internal/errors.ts";
import { recordTransaction, type TransactionRow } from "../transactions/transactions.ts";
import { openSigningKey } from "../wallets/wallets.ts";
import { failSpend, releaseNonce } from "./admission.ts";
import type { SpendDeps } from "./send.ts";

/**
 * Broadcasts a recorded spend. A definite rejection fails the spend (releasing its reservation and its
 * nonce); an unreachable node leaves it pending for the confirmer to re-broadcast.
 */
export async function broadcastRecorded(
  deps: Pick<SpendDeps, "db" | "keyring" | "chainClient">,
  client: ChainClient,
  row: TransactionRow,
): Promise<void> {
  if (!row.rawTx || !row.txHash) return;
  try {
    await client.broadcast({ txHash: row.txHash, raw: row.rawTx });
    await markBroadcast(deps.db, row.id);
  } catch (error) {
    if (isUnreachable(error) || isInconclusive(error)) return;
    const reason = error instanceof Error ? (error.message.split("\n")[0] ?? "rejected") : "rejected";
    // Only the caller that moved the row to failed gives its nonce back (or fills it): never two.
    const failedHere = await failSpend(deps.db, row.id, `broadcast rejected: ${reason}`);
    if (
      failedHere &&
      row.nonce !== null &&
      !(await releaseNonce(deps.db, row.chain, row.fromAddress, row.nonce))
    ) {
      await fillNonceGap(deps, client, { ...row, nonce: row.nonce });
    }
    throw errors.broadcastRejected(row.chain, reason, error);
  }
}

/**
 * A later nonce was already handed out, so the rejected one would stall every send after it: spend it on a
 * zero-value transfer to the wallet itself. Its gas is money moved, so it is recorded like any send.
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
  const privateKey = await openSigningKey(deps.db, deps.keyring, wallet, "evm");
  let signed: Awaited<ReturnType<ChainClient["signTransfer"]>>;
  try {
    signed = await client.signTransfer({
      privateKey,
      to: rejected.fromAddress,
      token: native,
      amount: 0n,
      nonce,
    });
  } finally {
    privateKey.fill(0);
  }
  const filler = await recordTransaction(deps.db, {
    walletId: rejected.walletId,
    type: "send",
    chain: rejected.chain,
    token: native.symbol,
    amountAtomic: 0n,
    decimals: native.decimals,
    fromAddress: rejected.fromAddress,
    toAddress: rejected.fromAddress,
    txHash: signed.txHash,
    status: "pending",
    usdMicros: 0n,
    rawTx: signed.raw,
    nonce,
  });
  // If this broadcast is lost too, the confirmer re-sends the recorded filler.
  await client.broadcast(signed).then(
    () => markBroadcast(deps.db, filler.id),
    () => {},
  );
}

async function markBroadcast(db: Db, transactionId: string): Promise<void> {
  await db.update(transactions).set({ broadcastAt: new Date() }).where(eq(transactions.id, transactionId));
}

/**
 * Rejections that do not prove the transaction can never land (a lagging node that does not know the
 * blockhash yet; a nonce already taken, perhaps by this very transaction): the confirmer decides later,
 * from the chain's own record.
 */
function isInconclusive(error: unknown): boolean {
  const text = String((error as { message?: unknown })?.message ?? error);
  return /BlockhashNotFound|blockhash not found|nonce too low|already known|replacement transaction underpriced/i.test(
    text,
  );
}
