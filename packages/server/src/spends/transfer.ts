/**
 * The parts of a transfer every payer shares (a wallet's send, the faucet): which token, how much, and what
 * the chain says signing it needs. All the network work of a transfer happens here, before any database lock.
 */
import { lostAt } from "../chains/addresses.ts";
import { chainCall, TransactionRejectedError } from "../chains/errors.ts";
import type {
  ChainClient,
  SignedTransfer,
  TokenInfo,
  TransferInput,
  TransferPlan,
  TransferPlanWithBalances,
} from "../chains/types.ts";
import type { Db } from "../internal/db/store.ts";
import { errors } from "../internal/errors.ts";
import { formatUnits, parseUnitsStrict } from "../internal/money.ts";
import {
  checkFunds,
  type checkFundsInFlight,
  type FundedPlan,
  paymentsRead,
  pendingPayments,
  pendingSolanaSpends,
  solanaSpendsRead,
} from "./funds.ts";

/** Amounts a chain can carry at all: uint256 on EVM, u64 on Solana. */
const MAX_ATOMIC = { evm: 2n ** 256n, solana: 2n ** 64n } as const;

/**
 * The most gas a transfer of an EVM chain's native coin may be given. A plain transfer takes 21,000 and a
 * smart account's receive a few tens of thousands more; a recipient's code that takes more makes the wallet
 * pay it as fees, which no limit of the policy counts (a contract looping in its fallback burned $15 of ETH
 * on one send of a wei). Token transfers run the served token's own contract, not the recipient's.
 */
export const MAX_NATIVE_SEND_GAS = 100_000n;

/**
 * Refuses a recipient (400 `invalid_address`) that is not an address of the chain's kind, or one where
 * whatever is sent is lost ({@link lostAt}): checked when a spend is asked for, and again when a held one is
 * approved (it may have been held before an address was known to be one).
 */
export function checkRecipient(client: ChainClient, to: string): void {
  if (!client.isValidAddress(to)) {
    // 40 hex digits in mixed case whose case is not their EIP-55 checksum: most likely a mistyped character.
    const checksum = client.config.kind === "evm" && /^0x[0-9a-fA-F]{40}$/.test(to);
    throw errors.invalidAddress(
      client.config.name,
      checksum ? "its mixed-case checksum (EIP-55) does not match: a character may be mistyped" : undefined,
    );
  }
  const lost = lostAt(client.config, to);
  if (lost) throw errors.lostRecipient(client.config.name, to, lost);
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
 * A decimal amount of `token` in atomic units: positive, within its decimals, and one the chain can carry;
 * refused (400 `invalid_amount`) with what is wrong with it.
 */
export function parseTransferAmount(client: ChainClient, token: TokenInfo, amount: string): bigint {
  const atomic = parseUnitsStrict(amount, token.decimals);
  if (atomic !== undefined && atomic > 0n && atomic < MAX_ATOMIC[client.config.kind]) return atomic;
  throw errors.invalidAmount(`Amount ${amountProblem(amount, atomic, token)}`);
}

/** What is wrong with an amount {@link parseTransferAmount} refused, in words a caller can act on. */
function amountProblem(amount: string, atomic: bigint | undefined, token: TokenInfo): string {
  if (atomic === 0n) return "must be more than 0";
  if (atomic !== undefined) return `is more than a transfer of ${token.symbol} can carry`;
  const trimmed = amount.trim();
  if (trimmed !== amount) return "must have no spaces around it";
  if (/^-/.test(trimmed)) return "must be positive";
  if (/^\d+,\d+$/.test(trimmed)) return "takes a dot before its decimals (1.5), not a comma";
  if (/^\d*\.?\d*e[+-]?\d+$/i.test(trimmed)) return "must be written in digits (1000), not with an exponent";
  const decimals = /^\d+\.(\d+)$/.exec(trimmed)?.[1];
  if (decimals !== undefined && decimals.length > token.decimals)
    return `has ${decimals.length} decimals: ${token.symbol} has ${token.decimals}`;
  if (/^0\d/.test(trimmed)) return "must not start with 0 (write 1.5, or 0.5)";
  if (/^\.\d+$/.test(trimmed)) return "needs a digit before its dot (0.5)";
  return "must be a decimal number such as 1.5";
}

/**
 * Plans a transfer and checks, from the same moment's reads, that the sender holds the amount and the fee,
 * that the recipient is no account nobody can sign for (Solana: a token account, a mint, a program, a
 * sysvar), and that receiving the native coin takes no more gas than a send may give (EVM,
 * {@link MAX_NATIVE_SEND_GAS}): the network part of a transfer, made before any lock is taken. Every read
 * runs at once (on EVM, in one request, with the states of the sender's x402 payments `pending` in the
 * token, see {@link pendingPayments}; on Solana, the statuses of the sender's sends pending follow the
 * balances, see {@link pendingSolanaSpends}). The plan carries the balances it was checked against and what
 * was read of those spends, for the check under the lock ({@link checkFundsInFlight}). The spends pending are
 * read from the store first, those of the wallet `walletId` (whose address is `input.from`).
 */
export async function planFundedTransfer(
  db: Db,
  client: ChainClient,
  walletId: string,
  input: TransferInput,
): Promise<FundedPlan> {
  const sender = { walletId, from: input.from };
  const [pending, solanaSpends] = await Promise.all([
    pendingPayments(db, client.config, sender, input.token),
    pendingSolanaSpends(db, client.config, sender),
  ]);
  const planned = await chainCall(client.config.name, () =>
    client.planTransferWithBalances(input, pending.authorizations, solanaSpends?.signatures),
  );
  const { plan } = planned;
  if (planned.lostRecipient)
    throw errors.lostRecipient(
      client.config.name,
      input.to,
      {
        token_account: "a token account (send to the wallet that owns it)",
        mint: "a token mint",
        token_program_other: "an account of a token program, not a wallet",
        program: "a program",
        sysvar: "a sysvar",
      }[planned.lostRecipient],
    );
  if (plan.evm && input.token.address === null && plan.evm.gas > MAX_NATIVE_SEND_GAS)
    throw errors.costlyRecipient(
      client.config.name,
      input.to,
      input.token.symbol,
      plan.evm.gas,
      MAX_NATIVE_SEND_GAS,
    );
  const funds = {
    balance: planned.balance,
    nativeBalance: planned.nativeBalance,
    native: client.config.nativeToken,
    payments: paymentsRead(pending.ids, planned.authorizationsUsed),
    lastAdmitted: pending.lastAdmitted,
    ...(solanaSpends ? { spends: solanaSpendsRead(solanaSpends, planned.signaturesLanded) } : {}),
    ...(planned.tokenAccountRent !== undefined && planned.rentExemption
      ? { rents: { tokenAccountRent: planned.tokenAccountRent, rentMinimum: planned.rentExemption.minimum } }
      : {}),
  };
  checkFunds(
    { type: "send", token: input.token, amount: input.amount },
    {
      balance: funds.balance,
      gas: { fee: plan.fee, nativeBalance: funds.nativeBalance, native: funds.native },
    },
  );
  checkRentExemption(client, input, planned);
  return { ...plan, funds };
}

/**
 * Refuses a Solana transfer its chain would refuse for rent (400 `below_rent_minimum`): one leaving, with more
 * than nothing but less than an account's rent exemption, the paying wallet once the fee is taken (the chain
 * checks that before the transfer runs; the fee includes the rent of a token account the transfer creates), the
 * paying wallet after sending its native coin, or the recipient of it. No-op where the plan carries no rent
 * exemption (EVM).
 */
export function checkRentExemption(
  client: ChainClient,
  input: TransferInput,
  planned: TransferPlanWithBalances,
): void {
  if (!planned.rentExemption) return;
  const { minimum, recipientBalance } = planned.rentExemption;
  const native = client.config.nativeToken;
  const fmt = (atomic: bigint) => formatUnits(atomic, native.decimals);
  const afterFee = planned.nativeBalance - planned.plan.fee;
  const sendsNative = recipientBalance !== undefined && input.to !== input.from;
  const checks: { account: "sender" | "recipient"; held: bigint; message: string }[] = [
    {
      account: "sender",
      held: afterFee,
      message: `this wallet would hold ${fmt(afterFee)} once the fee is paid`,
    },
  ];
  if (sendsNative) {
    const sent = afterFee - input.amount;
    checks.push(
      {
        account: "sender",
        held: sent,
        message: `this wallet would keep ${fmt(sent)}; send less, or everything but the fee`,
      },
      {
        account: "recipient",
        held: recipientBalance + input.amount,
        message: `the recipient would hold ${fmt(recipientBalance + input.amount)}; send at least ${fmt(minimum - recipientBalance)}`,
      },
    );
  }
  const refused = checks.find(({ held }) => held > 0n && held < minimum);
  if (!refused) return;
  throw errors.belowRentMinimum(
    `${client.config.name} refuses a transfer that leaves an account holding less than ${fmt(minimum)} ${native.symbol} (its rent exemption) but more than nothing: ${refused.message}`,
    {
      chain: client.config.name,
      account: refused.account,
      token: native.symbol,
      minimum: fmt(minimum),
      resulting: fmt(refused.held),
    },
  );
}

/** Plans a transfer (see {@link ChainClient.planTransfer}), a chain's failure leaving as the API's error. */
export function planTransfer(client: ChainClient, input: TransferInput): Promise<TransferPlan> {
  return chainCall(client.config.name, () => client.planTransfer(input));
}

/**
 * Hands a signed transfer to its chain: the one place a broadcast's outcome is read. A definite rejection
 * runs `onRejected` with the node's reason (a recorded spend is failed there) and leaves as the API's
 * `broadcast_rejected`; a failure that does not prove the transfer can never land (no answer, a nonce taken,
 * an unknown blockhash) leaves as the chain error it is, for the caller to decide.
 */
export async function broadcastTransfer(
  client: ChainClient,
  signed: SignedTransfer,
  onRejected?: (reason: string) => Promise<void>,
): Promise<void> {
  try {
    await client.broadcast(signed);
  } catch (error) {
    if (!(error instanceof TransactionRejectedError)) throw error;
    await onRejected?.(error.facts.reason);
    throw errors.broadcastRejected(client.config.name, error.facts.reason, error);
  }
}
