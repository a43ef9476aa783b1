/**
 * x402 payments through the one spend pipeline: a paid fetch on behalf of a wallet. The resource is fetched;
 * a 402 is answered by a payment that the wallet's policy admits under the policy row's lock (paused,
 * `requireSpendAuthorization`, the whitelist by payee or the resource's hostname, maxPerTx, the rolling daily
 * window), reserved and recorded `pending` as an `x402` transaction, and signed with the wallet's key, all in
 * one database transaction (`admitSpend`). What needs the network (the challenge, a Solana blockhash, the
 * balance, the daemon) comes before it; the retry with the payment header after it. The transaction is then
 * completed from the chain, checked against the receipt: `confirmed` with the settlement's hash, or `failed`
 * with its amount released; without an answer it stays `pending` and the confirmer completes it.
 */

import type { Address } from "@solana/kit";
import { and, eq } from "drizzle-orm";
import { chainCall } from "../chains/errors.ts";
import type { ChainClient, ChainConfig } from "../chains/types.ts";
import { transactions } from "../internal/db/schema.ts";
import type { Db } from "../internal/db/store.ts";
import { errors } from "../internal/errors.ts";
import { formatUnits } from "../internal/money.ts";
import { usdMicros } from "../policy/pricing.ts";
import { checkStaticRules, type SpendFacts } from "../policy/rules.ts";
import { checkDailyLimit } from "../policy/spend-window.ts";
import { vouchedHostname } from "../policy/whitelist.ts";
import { admitSpend, failSpend } from "../spends/admission.ts";
import { consumeSpendAuthorization, releaseRefusedSpendAuthorization } from "../spends/authorization.ts";
import { type FundsRead, readPaymentFunds } from "../spends/funds.ts";
import type { SpendAsker, SpendDeps } from "../spends/send.ts";
import { confirmTransactions, type TransactionRow } from "../transactions/transactions.ts";
import { findSpendingWallet, openSigningKey } from "../wallets/wallets.ts";
import { getPaymentSettlement, getRecentBlockhash, type PaymentSettlement } from "./chain-reads.ts";
import type { PaymentChallenge, SelectedRequirement } from "./challenge.ts";
import type { OutboundFetcher, OutboundResponse } from "./outbound-fetch.ts";
import { fetchWithPayment } from "./paid-fetch.ts";
import { type PaymentOnChain, paymentKeyOf, type SignedPayment, signPayment } from "./payment.ts";
import type { PaymentReceipt } from "./receipt.ts";

/** What a paid fetch needs from the rest of the service. */
export interface PaidFetchDeps extends SpendDeps {
  outbound: OutboundFetcher;
}

/** A paid fetch as a caller asks for it. */
export interface PaidFetchRequest {
  walletId: string;
  url: string;
  method?: string | undefined;
  headers?: Readonly<Record<string, string>> | undefined;
  body?: string | undefined;
  /** Pay only on this chain (a chain name of the wallet). */
  chain?: string | undefined;
  /** Pay at most this much of the token, in whole tokens (decimal string). */
  maxAmount?: string | undefined;
  /** A decision of the authorization daemon for exactly this payment; consumed before anything is signed. */
  spendDecisionId?: string | undefined;
  /** Ask the resource once and pay nothing: its answer, a 402 challenge included, is the result. */
  probe?: boolean | undefined;
}

/** How a paid fetch ended, for the caller. */
export interface PaidFetchResponse {
  /** The resource's last answer: the paid one, or the only one when it asked for no payment. */
  response: OutboundResponse;
  receipt: PaymentReceipt | undefined;
  /** The x402 transaction, when a payment was made (whatever became of it). */
  transaction: TransactionRow | undefined;
  /** The amount paid, in whole tokens, when a payment was made. */
  amountCharged: string | undefined;
}

/**
 * Fetches `request.url` for a wallet of the account, paying a 402 once within the wallet's policy.
 * Refusals before signing (policy, no payable requirement, a refused destination, funds) record nothing and
 * are thrown. After signing, the payment is recorded whatever happens: an unanswered retry throws 502
 * `payment_outcome_unknown` naming its transaction, which completes from the chain.
 *
 * @example
 * ```ts
 * const paid = await fetchAndPay(deps, accountId, { walletId, url: "https://api.example.com/weather" });
 * paid.response.status;        // 200
 * paid.transaction?.status;    // "confirmed"
 * ```
 */
export async function fetchAndPay(
  deps: PaidFetchDeps,
  accountId: string,
  request: PaidFetchRequest,
  asker: SpendAsker = {},
): Promise<PaidFetchResponse> {
  const { wallet, policy, sealedKeys } = await findSpendingWallet(deps.db, accountId, request.walletId);
  if (request.chain !== undefined && !wallet.chains.includes(request.chain)) {
    throw errors.chainNotInWallet(request.chain, wallet.chains);
  }
  const clients = new Map<string, ChainClient>();
  for (const name of wallet.chains) {
    const client = deps.chainClient(name);
    if (client) clients.set(client.config.network, client);
  }
  let recorded: TransactionRow | undefined;

  const pay = async ({
    challenge,
    selected,
    url,
  }: {
    challenge: PaymentChallenge;
    selected: SelectedRequirement;
    /** The resource that asked for the payment: the request's URL, or where its redirects led. */
    url: string;
  }): Promise<SignedPayment> => {
    const { requirement, chain, token } = selected;
    const client = clients.get(chain.network);
    const from = chain.kind === "evm" ? wallet.evmAddress : wallet.solanaAddress;
    if (!client || !from) throw errors.chainNotInWallet(chain.name, wallet.chains);
    if (wallet.status !== "active") throw errors.walletArchived(wallet.id);
    const value = usdMicros(token, requirement.amount);
    if (request.spendDecisionId !== undefined) {
      await consumeSpendAuthorization(deps.authzd, request.spendDecisionId, {
        kind: chain.kind,
        network: chain.network,
        asset: requirement.asset,
        amount: requirement.amount,
        destination: requirement.payTo,
        usdMicros: value,
        token: token.symbol,
        chain: chain.name,
      });
    }
    const spend: SpendFacts = {
      walletId: wallet.id,
      type: "x402",
      chain: chain.name,
      token,
      amount: requirement.amount,
      from,
      to: requirement.payTo,
      // The host that asked for the payment, not the one first asked: a whitelisted host's redirect to
      // another host does not make that host's payee allowed. Over plain http, only off this machine, none.
      alsoAllowedAs: [vouchedHostname(new URL(url))].filter((host) => host !== undefined),
      usdMicros: value,
      spendDecisionId: request.spendDecisionId,
      resource: url,
    };
    // The balance read starts at once; its outcome matters only if the policy lets the payment through.
    const balance = checkBalance(deps.db, client, { walletId: wallet.id, from }, selected);
    balance.catch(() => {});
    try {
      // The policy first, as read with the wallet (a refusal signs nothing); admitSpend checks it again
      // under the lock, where a change made since counts.
      checkStaticRules(policy, spend);
      await checkDailyLimit(deps.db, policy, spend, deps.now?.());
      // Then everything the payment needs, outside the database transaction: the balance read runs while the
      // key is opened and the payment signed (its signature depends on nothing the database decides, unlike
      // a transfer's nonce). A payment the lock then refuses was never sent anywhere.
      const [funds, payment] = await Promise.all([
        balance,
        (async () => {
          const recentBlockhash =
            chain.kind === "solana"
              ? await chainCall(chain.name, () => getRecentBlockhash(chain))
              : undefined;
          const privateKey = await openSigningKey(deps.db, deps.keyring, wallet, chain.kind, sealedKeys);
          try {
            return await signPayment({
              challenge,
              selected,
              privateKey,
              // Validity is judged by the chain's clock, not by the service's window clock.
              now: new Date(),
              ...(recentBlockhash ? { recentBlockhash } : {}),
            });
          } finally {
            privateKey.fill(0);
          }
        })(),
      ]);
      recorded = await admitSpend(deps.db, spend, {
        ...asker,
        ...(deps.now ? { now: deps.now() } : {}),
        // Checked again under the lock, against the wallet's sends and x402 payments in flight.
        paymentFunds: funds,
        sign: async () => ({
          x402Payment: storedPayment(payment),
          x402PaymentKey: paymentKeyOf(payment.onChain),
        }),
      });
      return payment;
    } catch (error) {
      // Refused before anything was recorded: the agent's credits come back.
      if (request.spendDecisionId !== undefined)
        await releaseRefusedSpendAuthorization(deps.authzd, request.spendDecisionId, error);
      throw error;
    }
  };

  const result = await fetchWithPayment(deps.outbound, {
    request: {
      url: request.url,
      ...(request.method === undefined ? {} : { method: request.method }),
      ...(request.headers === undefined ? {} : { headers: request.headers }),
      ...(request.body === undefined ? {} : { body: request.body }),
    },
    constraints: {
      chains: [...clients.values()].map((client) => client.config),
      ...(request.chain === undefined ? {} : { chain: request.chain }),
      ...(request.maxAmount === undefined ? {} : { maxAmount: request.maxAmount }),
    },
    ...(request.probe ? {} : { pay }),
  });
  if (result.outcome === "unpaid") {
    return {
      response: result.response,
      receipt: undefined,
      transaction: undefined,
      amountCharged: undefined,
    };
  }
  const row = recorded;
  if (!row) throw new Error("paid without a recorded transaction");
  const amountCharged = formatUnits(result.selected.requirement.amount, result.selected.token.decimals);
  if (result.outcome === "unknown") {
    const message = result.error instanceof Error ? result.error.message : "The paid request got no answer";
    throw errors.paymentOutcomeUnknown(row.id, message, result.error);
  }
  const completed = await completePayment(deps.db, result.selected.chain, row, {
    onChain: result.payment.onChain,
    receipt: result.receipt,
    rejection: result.outcome === "rejected" ? result.reason : undefined,
  });
  return { response: result.response, receipt: result.receipt, transaction: completed, amountCharged };
}

/**
 * The balance the payment needs; x402 payments cost the payer no gas (the facilitator pays it). Read
 * with what the check under the lock needs ({@link readPaymentFunds}), which it returns.
 */
async function checkBalance(
  db: Db,
  client: ChainClient,
  sender: { walletId: string; from: string },
  selected: SelectedRequirement,
): Promise<FundsRead | undefined> {
  const { token, requirement } = selected;
  const { from } = sender;
  const funds = await readPaymentFunds(db, client, sender, token);
  const balance =
    funds?.balance ?? (await chainCall(client.config.name, () => client.getBalance(from, token)));
  if (balance < requirement.amount) {
    throw errors.insufficientFunds(
      "insufficient_token",
      `Insufficient ${token.symbol}: balance ${formatUnits(balance, token.decimals)}, this payment needs ${formatUnits(requirement.amount, token.decimals)}`,
      {
        token: token.symbol,
        balance: formatUnits(balance, token.decimals),
        required: formatUnits(requirement.amount, token.decimals),
      },
    );
  }
  return funds;
}

/**
 * Completes a recorded payment after the paid request was answered. The chain decides, checked against
 * the receipt's hash: settled → `confirmed` with the settlement's hash; landed and failed, or expired →
 * `failed`, its amount released. Not on chain yet, it stays `pending` for the confirmer, also when the
 * server refused it (a 402 again, or a receipt with `success: false`): whoever holds the signed payment can
 * still settle it until it expires. The server's reason is noted, and becomes the failure's reason if it
 * expires.
 */
async function completePayment(
  db: Db,
  chain: ChainConfig,
  row: TransactionRow,
  outcome: { onChain: PaymentOnChain; receipt: PaymentReceipt | undefined; rejection: string | undefined },
): Promise<TransactionRow> {
  const { receipt, rejection } = outcome;
  let settlement: PaymentSettlement | undefined;
  try {
    settlement = await getPaymentSettlement(chain, outcome.onChain, receipt?.transaction || undefined);
  } catch {
    settlement = undefined;
  }
  const refusedBy =
    rejection ??
    (receipt?.success === false
      ? (receipt.errorReason ?? "the server reported the payment failed")
      : undefined);
  if (settlement?.state === "settled") {
    const confirmed = await confirmPayment(db, row.id, settlement.txHash);
    if (confirmed) return confirmed;
  } else if (settlement?.state === "failed") {
    await failSpend(db, row.id, `settlement failed on chain: ${settlement.reason}`);
  } else if (settlement?.state === "expired") {
    await failSpend(db, row.id, "the payment expired before it settled");
  } else if (refusedBy !== undefined) {
    // The signed payment stays valid until it expires, and whoever holds it may still settle it: it keeps
    // its place in the daily window, pending, until the chain says it can no longer land. The server's
    // reason is kept, and is the failure's reason then.
    await noteRejection(db, row.id, `payment rejected by the resource: ${refusedBy}`.slice(0, 500));
  }
  const [current] = await db.select().from(transactions).where(eq(transactions.id, row.id));
  return current ?? row;
}

/** Records why the resource refused a payment that is still pending (it may yet settle on chain). */
async function noteRejection(db: Db, transactionId: string, reason: string): Promise<void> {
  await db
    .update(transactions)
    .set({ failureReason: reason })
    .where(and(eq(transactions.id, transactionId), eq(transactions.status, "pending")));
}

/** Marks a pending payment confirmed with its settlement's hash; undefined when it was no longer pending. */
async function confirmPayment(
  db: Db,
  transactionId: string,
  txHash: string,
): Promise<TransactionRow | undefined> {
  const [confirmed] = await confirmTransactions(db, [
    { transactionId, confirmedAt: new Date(), txHash: txHash === "" ? null : txHash },
  ]);
  return confirmed;
}

/**
 * The confirmer's part: completes a pending `x402` transaction from the chain alone (no receipt came):
 * settled → `confirmed`; failed on chain or expired → `failed`, its amount released; otherwise left pending.
 * @example await settleRecordedPayment(db, registry.get("base")!, row);
 */
export async function settleRecordedPayment(db: Db, chain: ChainConfig, row: TransactionRow): Promise<void> {
  const onChain = paymentOnChain(row.x402Payment);
  if (!onChain) return;
  const settlement = await getPaymentSettlement(chain, onChain);
  switch (settlement.state) {
    case "settled":
      await confirmPayment(db, row.id, settlement.txHash);
      return;
    case "failed":
      await failSpend(db, row.id, `settlement failed on chain: ${settlement.reason}`);
      return;
    case "expired":
      await failSpend(db, row.id, row.failureReason ?? "the payment expired before it settled");
      return;
    case "pending":
      return;
  }
}

/** What is stored of a signed payment (`transactions.x402_payment`): its version, payer and on-chain identity. */
function storedPayment(payment: SignedPayment): Record<string, unknown> {
  const onChain =
    payment.onChain.kind === "evm"
      ? { ...payment.onChain, validBefore: payment.onChain.validBefore.toString() }
      : {
          ...payment.onChain,
          lastValidBlockHeight: payment.onChain.lastValidBlockHeight.toString(),
          blockhashSlot: payment.onChain.blockhashSlot?.toString(),
        };
  return { version: payment.version, payer: payment.payer, onChain };
}

/** The on-chain identity of a stored payment, or undefined when the row holds none readable. */
function paymentOnChain(stored: Record<string, unknown> | null): PaymentOnChain | undefined {
  const onChain = stored?.onChain as Record<string, unknown> | undefined;
  if (onChain?.kind === "evm") {
    return {
      kind: "evm",
      token: String(onChain.token) as `0x${string}`,
      authorizer: String(onChain.authorizer) as `0x${string}`,
      nonce: String(onChain.nonce) as `0x${string}`,
      validBefore: BigInt(String(onChain.validBefore)),
    };
  }
  if (onChain?.kind === "solana") {
    return {
      kind: "solana",
      payerSignature: String(onChain.payerSignature),
      sourceTokenAccount: String(onChain.sourceTokenAccount) as Address,
      lastValidBlockHeight: BigInt(String(onChain.lastValidBlockHeight)),
      ...(onChain.blockhashSlot === undefined
        ? {}
        : { blockhashSlot: BigInt(String(onChain.blockhashSlot)) }),
    };
  }
  return undefined;
}
