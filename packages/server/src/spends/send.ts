import type { AuthzdClient } from "../authzd/client.ts";
import type { ChainClient } from "../chains/types.ts";
import type { IdempotencyClaim } from "../idempotency/idempotency.ts";
import type { Db } from "../internal/db/store.ts";
import { errors } from "../internal/errors.ts";
import { usdMicros } from "../policy/pricing.ts";
import { checkStaticRules, type SpendFacts, withRecipientAccountRent } from "../policy/rules.ts";
import { checkDailyLimit } from "../policy/spend-window.ts";
import type { TransactionRow } from "../transactions/transactions.ts";
import type { Keyring } from "../wallets/keyring.ts";
import { findSpendingWallet, openSigningKey } from "../wallets/wallets.ts";
import { type AskingCredential, admitSpend } from "./admission.ts";
import {
  checkCreditsCoverSpend,
  consumeSpendAuthorization,
  NATIVE_ASSET,
  releaseRefusedSpendAuthorization,
} from "./authorization.ts";
import { broadcastRecorded } from "./broadcast.ts";
import { checkRecipient, findToken, parseTransferAmount, planFundedTransfer } from "./transfer.ts";

/** What a spend needs from the rest of the service. */
export interface SpendDeps {
  db: Db;
  keyring: Keyring;
  chainClient(name: string): ChainClient | undefined;
  /** The authorization daemon spend decisions are verified with; undefined when none is configured. */
  authzd: AuthzdClient | undefined;
  /** The clock of the daily limit's rolling window and of approvals' expiry; default the system clock. */
  now?: () => Date;
  /** How long a spend above `approvalAbove` waits for a decision; default one hour. */
  approvalTtlMs?: number;
}

/** Who asks for a spend, as its request carries it. */
export interface SpendAsker {
  /** The claim of the request's Idempotency-Key. */
  idempotency?: IdempotencyClaim | undefined;
  /** The credential the request came with: still live when the spend is admitted ({@link holdAskingCredential}). */
  credential?: AskingCredential | undefined;
}

export interface SendRequest {
  to: string;
  /** Decimal string in token units. */
  amount: string;
  token: string;
  chain: string;
  /** A decision of the authorization daemon; consumed there (and checked) before anything is signed. */
  spendDecisionId?: string | undefined;
}

/**
 * Sends `amount` of a token from one of the account's wallets. Checks, in order: the request itself,
 * the wallet is active, the policy, funds including fees. Records the spend `pending` before broadcasting,
 * then broadcasts; the confirmer moves it to `confirmed` or `failed`. A spend above the policy's
 * `approvalAbove` is recorded `pending_approval` instead, unsigned, until an admin decides (approvals.ts).
 */
export async function send(
  deps: SpendDeps,
  accountId: string,
  walletId: string,
  request: SendRequest,
  asker: SpendAsker = {},
): Promise<TransactionRow> {
  const { wallet, policy, sealedKeys } = await findSpendingWallet(deps.db, accountId, walletId);
  if (!wallet.chains.includes(request.chain)) throw errors.chainNotInWallet(request.chain, wallet.chains);
  const client = deps.chainClient(request.chain);
  if (!client) throw errors.chainNotInWallet(request.chain, wallet.chains);
  const token = findToken(client, request.token);
  const amount = parseTransferAmount(client, token, request.amount);
  checkRecipient(client, request.to);
  if (wallet.status !== "active") throw errors.walletArchived(wallet.id);

  const kind = client.config.kind;
  const from = kind === "evm" ? wallet.evmAddress : wallet.solanaAddress;
  if (!from) throw errors.chainNotInWallet(request.chain, wallet.chains);
  const value = usdMicros(token, amount);
  const decision =
    request.spendDecisionId === undefined
      ? undefined
      : await consumeSpendAuthorization(deps.authzd, request.spendDecisionId, {
          kind,
          network: client.config.network,
          asset: token.address ?? NATIVE_ASSET,
          amount,
          destination: request.to,
          usdMicros: value,
          token: token.symbol,
          chain: request.chain,
        });
  const spend: SpendFacts = {
    walletId: wallet.id,
    type: "send",
    chain: request.chain,
    token,
    amount,
    from,
    to: request.to,
    usdMicros: value,
    spendDecisionId: request.spendDecisionId,
  };
  let row: TransactionRow;
  try {
    // The policy first (a cheap refusal needs no chain call); the atomic step checks it again under a lock.
    checkStaticRules(policy, spend);
    await checkDailyLimit(deps.db, policy, spend, deps.now?.());
    // Everything from the chain before the lock: under it, only the decision, the nonce and local signing.
    const plan = await planFundedTransfer(deps.db, client, wallet.id, {
      from,
      to: request.to,
      token,
      amount,
    });
    // Counted with what else it gives the recipient, now that the plan says.
    const counted = withRecipientAccountRent(spend, client.config.nativeToken, plan.recipientAccountRent);
    // And against its decision's credits, which were checked against its amount alone.
    if (decision) checkCreditsCoverSpend(decision, counted);
    const privateKey = await openSigningKey(deps.db, deps.keyring, wallet, kind, sealedKeys);
    try {
      row = await admitSpend(deps.db, counted, {
        plan,
        ...asker,
        ...(deps.now ? { now: deps.now() } : {}),
        ...(deps.approvalTtlMs !== undefined ? { approvalTtlMs: deps.approvalTtlMs } : {}),
        sign: (nonce) => client.signTransfer(plan, privateKey, nonce),
      });
    } finally {
      privateKey.fill(0);
    }
  } catch (error) {
    // Refused before anything was recorded: the agent's credits come back.
    if (request.spendDecisionId !== undefined)
      await releaseRefusedSpendAuthorization(deps.authzd, request.spendDecisionId, error);
    throw error;
  }
  // Held for an admin's approval: nothing was signed, so nothing is sent until it is approved.
  if (row.status === "pending_approval") return row;
  await broadcastRecorded(deps, client, row);
  return row;
}
