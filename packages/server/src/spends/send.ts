import { eq } from "drizzle-orm";
import type { ChainClient, TokenInfo } from "../chains/types.ts";
import type { IdempotencyClaim } from "../idempotency/idempotency.ts";
import { transactions, wallets } from "../internal/db/schema.ts";
import type { Db } from "../internal/db/store.ts";
import { AppError, errors } from "../internal/errors.ts";
import { formatUnits, parseUnitsStrict } from "../internal/money.ts";
import { getPolicyRow } from "../policy/policy.ts";
import { recordTransaction, type TransactionRow } from "../transactions/transactions.ts";
import type { Keyring } from "../wallets/keyring.ts";
import { findWalletForAccount, openSigningKey } from "../wallets/wallets.ts";
import { admitSpend, checkStaticRules, failSpend, releaseNonce, type SpendFacts } from "./admission.ts";
import { usdMicros } from "./pricing.ts";

/** What a spend needs from the rest of the service. */
export interface SpendDeps {
  db: Db;
  keyring: Keyring;
  chainClient(name: string): ChainClient | undefined;
}

export interface SendRequest {
  to: string;
  /** Decimal string in token units. */
  amount: string;
  token: string;
  chain: string;
  spendDecisionId?: string | undefined;
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
  if (amount === undefined || amount === 0n) {
    throw errors.invalidAmount(
      `Amount must be a positive decimal number with at most ${token.decimals} decimals for ${token.symbol}`,
    );
  }
  if (!client.isValidAddress(request.to)) throw errors.invalidAddress(request.chain);
  if (wallet.status !== "active") throw errors.walletArchived(wallet.id);

  const kind = client.config.kind;
  const from = kind === "evm" ? wallet.evmAddress : wallet.solanaAddress;
  if (!from) throw errors.chainNotInWallet(request.chain, wallet.chains);
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
  // The policy first (a cheap refusal needs no chain call); the atomic step checks it again under a lock.
  checkStaticRules(await getPolicyRow(deps.db, wallet.id), spend);
  await checkFunds(client, from, request.to, token, amount);

  const evmNonce =
    kind === "evm" && client.getPendingNonce
      ? {
          chainPendingNonce: await onChain(
            client,
            () => client.getPendingNonce?.(from) ?? Promise.resolve(0),
          ),
        }
      : undefined;
  const privateKey = await openSigningKey(deps.db, deps.keyring, wallet, kind);
  let row: TransactionRow;
  try {
    row = await admitSpend(deps.db, spend, {
      ...(evmNonce ? { evmNonce } : {}),
      idempotency,
      sign: (nonce) =>
        onChain(client, () =>
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
  await broadcastRecorded(deps, client, row);
  return row;
}

/**
 * Broadcasts a recorded spend. A definite rejection fails the spend (releasing its reservation and its
 * nonce); an unreachable node leaves it pending for the confirmer to re-broadcast.
 */
async function broadcastRecorded(deps: SpendDeps, client: ChainClient, row: TransactionRow): Promise<void> {
  if (!row.rawTx || !row.txHash) return;
  try {
    await client.broadcast({ txHash: row.txHash, raw: row.rawTx });
    await markBroadcast(deps.db, row.id);
  } catch (error) {
    if (isUnreachable(error)) return;
    const reason = error instanceof Error ? (error.message.split("\n")[0] ?? "rejected") : "rejected";
    await failSpend(deps.db, row.id, `broadcast rejected: ${reason}`);
    if (row.nonce !== null && !(await releaseNonce(deps.db, row.chain, row.fromAddress, row.nonce))) {
      await fillNonceGap(deps, client, row);
    }
    throw errors.broadcastRejected(row.chain, reason, error);
  }
}

/**
 * A later nonce was already handed out, so the rejected one would stall every send after it: spend it on a
 * zero-value transfer to the wallet itself. Its gas is money moved, so it is recorded like any send.
 */
async function fillNonceGap(deps: SpendDeps, client: ChainClient, rejected: TransactionRow): Promise<void> {
  const nonce = rejected.nonce ?? 0;
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

function isUnreachable(error: unknown): boolean {
  const text = String((error as { message?: unknown })?.message ?? error);
  return /fetch failed|ECONNREFUSED|ECONNRESET|ETIMEDOUT|socket hang up|network/i.test(text);
}

/** Runs a chain call, turning an unreachable RPC into 502 `chain_unavailable`. */
async function onChain<T>(client: ChainClient, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    if (error instanceof AppError) throw error;
    if (isUnreachable(error)) throw errors.chainUnavailable(client.config.name, error);
    throw error;
  }
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
  const [tokenBalance, nativeBalance, fee] = await onChain(client, () =>
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
