/**
 * The chain reads x402 payments need: a Solana blockhash to sign with, and how a signed payment ended when
 * no receipt says so, in the shape the chain layer would offer them ({@link X402ChainReads}). They go
 * through the chain layer's transports (`evmReadClient`, `solanaReadRpc`): its errors, retries and time limits.
 */
import type { Address, Signature } from "@solana/kit";
import { type Hash, parseEventLogs } from "viem";
import { ChainRequestError, chainCall, findChainError, scrubRpcUrl } from "../chains/errors.ts";
import { EIP3009_ABI, evmReadClient } from "../chains/evm.ts";
import { SOLANA_NODE_LAG, solanaReadRpc } from "../chains/solana.ts";
import type { ChainConfig } from "../chains/types.ts";
import type { PaymentOnChain, RecentBlockhash } from "./payment.ts";

/** How a signed payment stands on chain. */
export type PaymentSettlement =
  /** Settled: the transfer landed and succeeded in `txHash`. */
  | { state: "settled"; txHash: string }
  /** Landed but failed (Solana: the fee was charged, nothing transferred); it can never settle now. */
  | { state: "failed"; txHash: string; reason: string }
  /** Not settled yet, and still able to. */
  | { state: "pending" }
  /** Not settled, and never can be: EVM past `validBefore`; Solana past the blockhash's last valid height. */
  | { state: "expired" };

/** The reads, as the chain layer would offer them (the shape proposed for `ChainClient`). */
export interface X402ChainReads {
  /** Solana: a recent blockhash, at `confirmed`. */
  getRecentBlockhash(chain: ChainConfig): Promise<RecentBlockhash>;
  /** Where a signed payment stands; `claimedTx` (a receipt's) is checked, never trusted. */
  getPaymentSettlement(
    chain: ChainConfig,
    onChain: PaymentOnChain,
    claimedTx?: string,
  ): Promise<PaymentSettlement>;
}

/** How far back an EVM settlement is looked for when no receipt names it (an hour of Base blocks and more). */
const EVM_LOG_WINDOW = 5_000n;
/** Signatures asked for per page of the payer's token account history. */
const SOLANA_HISTORY_PAGE = 1000;
/**
 * For payments recorded without their blockhash's slot: a transaction can use a blockhash for 150 blocks
 * (`lastValidBlockHeight` is 150 past it on clusters); twice that is a safe margin. A slot is never below
 * its block's height, so no transaction in a slot older than `lastValidBlockHeight - BLOCKHASH_WINDOW` can be
 * the payment. A loose bound: on mainnet, slots run millions ahead of block heights.
 */
const BLOCKHASH_WINDOW = 300n;

/**
 * A recent blockhash of a Solana chain, to sign a payment with.
 * @example await getRecentBlockhash(registry.get("solana")!) // { blockhash: "9x…", lastValidBlockHeight: 1234n }
 */
export async function getRecentBlockhash(chain: ChainConfig): Promise<RecentBlockhash> {
  const rpc = solanaReadRpc(chain);
  const { context, value } = await read(chain, () =>
    rpc.getLatestBlockhash({ commitment: "confirmed" }).send(),
  );
  return { blockhash: value.blockhash, lastValidBlockHeight: value.lastValidBlockHeight, slot: context.slot };
}

/**
 * Where a signed payment stands on its chain. With `claimedTx` (the transaction a receipt names), that
 * transaction is read and must be this payment's (EVM: it emitted `AuthorizationUsed` for this authorizer
 * and nonce; Solana: it carries the payer's signature); otherwise the chain is searched (EVM:
 * `authorizationState` and the `AuthorizationUsed` log; Solana: the payer's token account history).
 *
 * @example
 * ```ts
 * await getPaymentSettlement(chain, signed.onChain, receipt?.transaction);
 * // { state: "settled", txHash: "0x…" } | { state: "pending" } | { state: "expired" } | { state: "failed", … }
 * ```
 */
export function getPaymentSettlement(
  chain: ChainConfig,
  onChain: PaymentOnChain,
  claimedTx?: string,
): Promise<PaymentSettlement> {
  if (onChain.kind === "evm") {
    if (chain.kind !== "evm") throw new Error(`an EVM payment on ${chain.kind} chain ${chain.name}`);
    return evmSettlement(chain, onChain, claimedTx);
  }
  if (chain.kind !== "solana") throw new Error(`a Solana payment on ${chain.kind} chain ${chain.name}`);
  return solanaSettlement(chain, onChain, claimedTx);
}

async function evmSettlement(
  chain: ChainConfig,
  payment: Extract<PaymentOnChain, { kind: "evm" }>,
  claimedTx: string | undefined,
): Promise<PaymentSettlement> {
  const client = evmReadClient(chain);
  // The transaction a receipt names, read first: one call settles the usual case. It counts only if it
  // succeeded and used this very authorization on this token; anything else is searched for below.
  if (claimedTx !== undefined && /^0x[0-9a-fA-F]{64}$/.test(claimedTx)) {
    const receipt = await read(chain, () =>
      client.getTransactionReceipt({ hash: claimedTx as Hash }).catch(() => null),
    );
    const usedHere = parseEventLogs({
      abi: EIP3009_ABI,
      eventName: "AuthorizationUsed",
      args: { authorizer: payment.authorizer, nonce: payment.nonce },
      logs: receipt?.logs ?? [],
    }).some((log) => log.address.toLowerCase() === payment.token.toLowerCase());
    if (receipt?.status === "success" && usedHere)
      return { state: "settled", txHash: receipt.transactionHash };
  }
  // The block is read before the state, and the state read at that block: if the authorization is unused
  // at a block dated at or past validBefore, no later block can use it. (Behind a load balancer the state may
  // come from another node: one that has not that block yet fails the read rather than answer unused.)
  const head = await read(chain, () => client.getBlock({ blockTag: "latest" }));
  const used = await read(chain, () =>
    client.readContract({
      address: payment.token,
      abi: EIP3009_ABI,
      functionName: "authorizationState",
      args: [payment.authorizer, payment.nonce],
      blockNumber: head.number,
    }),
  );
  // transferWithAuthorization requires block.timestamp < validBefore, and later blocks are dated later.
  if (!used) return head.timestamp >= payment.validBefore ? { state: "expired" } : { state: "pending" };
  const logs = await read(chain, () =>
    client.getLogs({
      address: payment.token,
      event: EIP3009_ABI[1],
      args: { authorizer: payment.authorizer, nonce: payment.nonce },
      fromBlock: head.number > EVM_LOG_WINDOW ? head.number - EVM_LOG_WINDOW : 0n,
      // Not `head`: the authorization may have been used in a block mined after it was read.
      toBlock: "latest",
    }),
  ).catch((error: unknown) => {
    // A search the endpoint refuses (hosted endpoints cap eth_getLogs ranges) would be refused at every
    // pass; an endpoint not answering is asked again at the next.
    if (findChainError(error) instanceof ChainRequestError) return [];
    throw error;
  });
  const log = logs[0];
  // Used but not found within the window, or not searched (or used by cancelAuthorization, which the payer
  // never sends): settled all the same, the transaction unknown.
  return { state: "settled", txHash: log?.transactionHash ?? "" };
}

async function solanaSettlement(
  chain: ChainConfig,
  payment: Extract<PaymentOnChain, { kind: "solana" }>,
  claimedTx: string | undefined,
): Promise<PaymentSettlement> {
  const rpc = solanaReadRpc(chain);
  // The height is read before searching: a transaction missing at a height past its last valid one can
  // never land afterwards. Its slot is the least the history must have seen (`minContextSlot`): behind a load
  // balancer, a node behind the one that told the height would not list a payment that landed meanwhile.
  const tip = await read(chain, () => rpc.getEpochInfo({ commitment: "confirmed" }).send());
  const candidates: string[] = [];
  if (claimedTx !== undefined && /^[1-9A-HJ-NP-Za-km-z]{64,88}$/.test(claimedTx)) candidates.push(claimedTx);
  const listed = await signaturesAfter(chain, payment.sourceTokenAccount, {
    newestSlotBefore: newestSlotBefore(payment),
    seenBySlot: tip.absoluteSlot,
  });
  for (const { signature } of listed) if (signature !== claimedTx) candidates.push(signature);
  // A recent listed transaction that a node could not return (one behind the one that listed it) may be the
  // payment; further back it is missing for another reason (history pruned), and keeps nothing pending.
  const recentlyListed = new Set(
    listed.filter(({ slot }) => slot + SOLANA_NODE_LAG >= tip.absoluteSlot).map(({ signature }) => signature),
  );
  let unread = false;
  for (const signature of candidates) {
    const transaction = await read(chain, () =>
      rpc
        .getTransaction(signature as Signature, {
          commitment: "confirmed",
          encoding: "json",
          maxSupportedTransactionVersion: 0,
        })
        .send(),
    );
    if (transaction === null && recentlyListed.has(signature)) unread = true;
    if (!transaction?.transaction.signatures.includes(payment.payerSignature as Signature)) continue;
    if (transaction.meta?.err) {
      return { state: "failed", txHash: signature, reason: JSON.stringify(transaction.meta.err, bigints) };
    }
    return { state: "settled", txHash: signature };
  }
  return tip.blockHeight > payment.lastValidBlockHeight && !unread
    ? { state: "expired" }
    : { state: "pending" };
}

/**
 * How many slots before the one the blockhash was read at are searched too. The payment cannot be in a block
 * already confirmed when the blockhash was read: it did not exist yet. The margin covers an answer whose slot
 * is still being made (a `processed` view, whose bank still takes transactions; a local chain whose first
 * slot counts as confirmed while it is made).
 */
const BLOCKHASH_SLOT_MARGIN = 32n;

/** A slot the payment cannot be in, nor any slot before it. */
function newestSlotBefore(payment: Extract<PaymentOnChain, { kind: "solana" }>): bigint {
  if (payment.blockhashSlot !== undefined) {
    return payment.blockhashSlot > BLOCKHASH_SLOT_MARGIN
      ? payment.blockhashSlot - BLOCKHASH_SLOT_MARGIN
      : -1n;
  }
  return payment.lastValidBlockHeight > BLOCKHASH_WINDOW
    ? payment.lastValidBlockHeight - BLOCKHASH_WINDOW - 1n
    : -1n;
}

/**
 * The signatures of an account's history, newest first, down to the first in `newestSlotBefore` or before it,
 * as seen by a node that has reached `seenBySlot` at least.
 */
async function signaturesAfter(
  chain: ChainConfig,
  account: Address,
  slots: { newestSlotBefore: bigint; seenBySlot: bigint },
): Promise<{ signature: string; slot: bigint }[]> {
  const rpc = solanaReadRpc(chain);
  const found: { signature: string; slot: bigint }[] = [];
  let before: Signature | undefined;
  for (;;) {
    const page = await read(chain, () =>
      rpc
        .getSignaturesForAddress(account, {
          limit: SOLANA_HISTORY_PAGE,
          commitment: "confirmed",
          minContextSlot: slots.seenBySlot,
          ...(before === undefined ? {} : { before }),
        })
        .send(),
    );
    for (const entry of page) {
      if (entry.slot <= slots.newestSlotBefore) return found;
      found.push({ signature: entry.signature, slot: entry.slot });
    }
    const last = page.at(-1);
    if (page.length < SOLANA_HISTORY_PAGE || last === undefined) return found;
    before = last.signature;
  }
}

function bigints(_key: string, value: unknown): unknown {
  return typeof value === "bigint" ? value.toString() : value;
}

/** A chain read: unreachable endpoints become 502 `chain_unavailable`, and no error carries the RPC URL. */
async function read<T>(chain: ChainConfig, call: () => Promise<T>): Promise<T> {
  try {
    // viem wraps what the transport raised in its own errors (a contract read's, say): the chain error first.
    return await chainCall(chain.name, () =>
      call().catch((error: unknown) => {
        throw findChainError(error) ?? error;
      }),
    );
  } catch (error) {
    throw scrubRpcUrl(error, chain.rpcUrl);
  }
}
