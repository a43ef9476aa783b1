import type { AuthzdClient } from "../authzd/client.ts";
import { chainCall } from "../chains/errors.ts";
import type { ChainClient, TokenInfo } from "../chains/types.ts";
import type { IdempotencyClaim } from "../idempotency/idempotency.ts";
import { type Db, isUniqueViolation } from "../internal/db/store.ts";
import { errors } from "../internal/errors.ts";
import { formatUnits, parseUnitsStrict } from "../internal/money.ts";
import { getPolicyRow } from "../policy/policy.ts";
import type { TransactionRow } from "../transactions/transactions.ts";
import type { Keyring } from "../wallets/keyring.ts";
import { findWalletForAccount, openSigningKey } from "../wallets/wallets.ts";
import { admitSpend, checkDailyLimit, checkStaticRules, type SpendFacts } from "./admission.ts";
import {
  alreadyUsed,
  consumeSpendAuthorization,
  NATIVE_ASSET,
  releaseRefusedSpendAuthorization,
} from "./authorization.ts";
import { broadcastRecorded } from "./broadcast.ts";
import { usdMicros } from "./pricing.ts";

/** What a spend needs from the rest of the service. */
export interface SpendDeps {
  db: Db;
  keyring: Keyring;
  chainClient(name: string): ChainClient | undefined;
  /** The authorization daemon spend decisions are verified with; undefined when none is configured. */
  authzd: AuthzdClient | undefined;
  /** The clock of the daily limit's rolling window; default the system clock. */
  now?: () => Date;
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

/** Amounts a chain can carry at all: uint256 on EVM, u64 on Solana. */
const MAX_ATOMIC = { evm: 2n ** 256n, solana: 2n ** 64n } as const;

/** EVM's 0x000…0 and Solana's all-zero key (the System Program, which cannot spend what it receives). */
export function isZeroAddress(address: string): boolean {
  return /^0x0{40}$/i.test(address) || address === "11111111111111111111111111111111";
}

/** Finds a token on a chain by symbol, the native coin included. */
export function findToken(client: ChainClient, symbol: string): TokenInfo {
  const all = [client.config.nativeToken, ...client.config.tokens];
  const token = all.find((t) => t.symbol.toUpperCase() === symbol.toUpperCase());
  if (!token)
    throw errors.unknownToken(
      symbol,
      client.config.name,
      all.map((t) => t.symbol),
    );
  return token;
}

/**
 * Sends `amount` of a token from one of the account's wallets. Checks, in order: the request itself,
 * the wallet is active, the policy, funds including fees. Records the spend `pending` before broadcasting,
 * then broadcasts; the confirmer moves it to `confirmed` or `failed`.
 */
export async function send(
  deps: SpendDeps,
  accountId: string,
  walletId: string,
  request: SendRequest,
  idempotency?: IdempotencyClaim,
): Promise<TransactionRow> {
  const wallet = await findWalletForAccount(deps.db, accountId, walletId);
  if (!wallet.chains.includes(request.chain)) throw errors.chainNotInWallet(request.chain, wallet.chains);
  const client = deps.chainClient(request.chain);
  if (!client) throw errors.chainNotInWallet(request.chain, wallet.chains);
  const token = findToken(client, request.token);
  const amount = parseUnitsStrict(request.amount, token.decimals);
  if (amount === undefined || amount === 0n || amount >= MAX_ATOMIC[client.config.kind]) {
    throw errors.invalidAmount(
      `Amount must be a positive decimal number with at most ${token.decimals} decimals for ${token.symbol}`,
    );
  }
  if (!client.isValidAddress(request.to)) throw errors.invalidAddress(request.chain);
  if (isZeroAddress(request.to)) throw errors.zeroAddress(request.chain, request.to);
  if (wallet.status !== "active") throw errors.walletArchived(wallet.id);

  const kind = client.config.kind;
  const from = kind === "evm" ? wallet.evmAddress : wallet.solanaAddress;
  if (!from) throw errors.chainNotInWallet(request.chain, wallet.chains);
  if (request.spendDecisionId !== undefined) {
    await consumeSpendAuthorization(deps.authzd, request.spendDecisionId, {
      kind,
      network: client.config.network,
      asset: token.address ?? NATIVE_ASSET,
      amount,
      destination: request.to,
    });
  }
  const spend: SpendFacts = {
    walletId: wallet.id,
    type: "send",
    chain: request.chain,
    token,
    amount,
    from,
    to: request.to,
    usdMicros: usdMicros(token, amount),
    spendDecisionId: request.spendDecisionId,
  };
  let row: TransactionRow;
  try {
    // The policy first (a cheap refusal needs no chain call); the atomic step checks it again under a lock.
    const policy = await getPolicyRow(deps.db, wallet.id);
    checkStaticRules(policy, spend);
    await checkDailyLimit(deps.db, policy, spend, deps.now?.());
    await checkFunds(client, from, request.to, token, amount);

    const evmNonce =
      kind === "evm" && client.getPendingNonce
        ? {
            chainPendingNonce: await chainCall(
              client.config.name,
              () => client.getPendingNonce?.(from) ?? Promise.resolve(0),
            ),
          }
        : undefined;
    const privateKey = await openSigningKey(deps.db, deps.keyring, wallet, kind);
    try {
      row = await admitSpend(deps.db, spend, {
        ...(evmNonce ? { evmNonce } : {}),
        idempotency,
        ...(deps.now ? { now: deps.now() } : {}),
        sign: (nonce) =>
          chainCall(client.config.name, () =>
            client.signTransfer({
              privateKey,
              to: request.to,
              token,
              amount,
              ...(nonce !== undefined ? { nonce } : {}),
            }),
          ),
      });
    } finally {
      privateKey.fill(0);
    }
  } catch (error) {
    if (request.spendDecisionId !== undefined) {
      // Two spends raced with one decision: the unique index let the first in, and that spend holds it.
      if (isUniqueViolation(error, "transactions_spend_decision_key"))
        throw alreadyUsed(request.spendDecisionId);
      // Refused before anything was recorded: the agent's credits come back.
      await releaseRefusedSpendAuthorization(deps.authzd, request.spendDecisionId, error);
    }
    throw error;
  }
  await broadcastRecorded(deps, client, row);
  return row;
}

async function checkFunds(
  client: ChainClient,
  from: string,
  to: string,
  token: TokenInfo,
  amount: bigint,
): Promise<void> {
  const native = client.config.nativeToken;
  const isNative = token.address === null;
  const [tokenBalance, nativeBalance, fee] = await chainCall(client.config.name, () =>
    Promise.all([
      client.getBalance(from, token),
      isNative ? Promise.resolve(0n) : client.getBalance(from, native),
      client.estimateTransferFee(from, to, token, amount),
    ]),
  );
  if (tokenBalance < amount) {
    throw errors.insufficientFunds(
      "insufficient_token",
      `Insufficient ${token.symbol}: balance ${formatUnits(tokenBalance, token.decimals)}, this send needs ${formatUnits(amount, token.decimals)}`,
      {
        token: token.symbol,
        balance: formatUnits(tokenBalance, token.decimals),
        required: formatUnits(amount, token.decimals),
      },
    );
  }
  const gasAvailable = isNative ? tokenBalance - amount : nativeBalance;
  if (gasAvailable < fee) {
    throw errors.insufficientFunds(
      "insufficient_gas",
      `Insufficient ${native.symbol} for fees: ${formatUnits(gasAvailable, native.decimals)} available, about ${formatUnits(fee, native.decimals)} needed`,
      {
        token: native.symbol,
        available: formatUnits(gasAvailable, native.decimals),
        required: formatUnits(fee, native.decimals),
      },
    );
  }
}
