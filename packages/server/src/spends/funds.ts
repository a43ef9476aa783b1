/**
 * Whether a wallet holds what a transfer takes: the amount and the fee cap. Checked against the balances read
 * when the transfer was planned, before any lock ({@link planFundedTransfer}), and again under the wallet's
 * spend lock against what EVM sends not yet mined when the balances were read take from them
 * ({@link checkFundsInFlight}).
 */
import { sql } from "drizzle-orm";
import { type Hex, parseTransaction } from "viem";
import type { TokenInfo, TransferPlan } from "../chains/types.ts";
import { selectRows, type Tx } from "../internal/db/store.ts";
import { errors } from "../internal/errors.ts";
import { formatUnits } from "../internal/money.ts";
import type { SpendFacts } from "../policy/rules.ts";

/** What the sender held when a transfer was planned, read together with the plan (and, on EVM, its nonce). */
export interface PlannedFunds {
  /** Of the token transferred, in its atomic units. */
  balance: bigint;
  /** Of the native coin (the same figure when the token is the native coin). */
  nativeBalance: bigint;
  native: TokenInfo;
}

/** A transfer's plan with the funds it was planned against. */
export type FundedPlan = TransferPlan & { funds: PlannedFunds };

/** What sends the chain did not know of when the funds were read take from them. */
interface InFlight {
  sends: number;
  /** Their amounts of the token transferred. */
  token: bigint;
  /** Their amounts of the native coin, and a fee cap each. */
  native: bigint;
}

/**
 * Refuses, 422 `insufficient_token` or `insufficient_gas`, a transfer of `amount` of `token` that the funds
 * (less what is in flight) do not cover with its fee.
 */
export function checkFunds(
  token: TokenInfo,
  amount: bigint,
  fee: bigint,
  funds: PlannedFunds,
  inFlight: InFlight = { sends: 0, token: 0n, native: 0n },
): void {
  const { native } = funds;
  const isNative = token.address === null;
  const ofWhich = (taken: bigint, decimals: number) =>
    inFlight.sends === 0
      ? ""
      : `, of which ${formatUnits(taken, decimals)} is taken by ${inFlight.sends} sends not yet on chain`;
  const tokenLeft = funds.balance - inFlight.token;
  if (tokenLeft < amount) {
    throw errors.insufficientFunds(
      "insufficient_token",
      `Insufficient ${token.symbol}: balance ${formatUnits(funds.balance, token.decimals)}${ofWhich(inFlight.token, token.decimals)}${inFlight.sends === 0 ? "," : ";"} this send needs ${formatUnits(amount, token.decimals)}`,
      {
        token: token.symbol,
        balance: formatUnits(funds.balance, token.decimals),
        required: formatUnits(amount, token.decimals),
      },
    );
  }
  const gasAvailable = isNative
    ? funds.balance - inFlight.native - amount
    : funds.nativeBalance - inFlight.native;
  if (gasAvailable < fee) {
    throw errors.insufficientFunds(
      "insufficient_gas",
      `Insufficient ${native.symbol} for fees: ${formatUnits(gasAvailable, native.decimals)} available${inFlight.sends === 0 ? "" : ` once ${inFlight.sends} sends not yet on chain are paid for`}, about ${formatUnits(fee, native.decimals)} needed`,
      {
        token: native.symbol,
        available: formatUnits(gasAvailable, native.decimals),
        required: formatUnits(fee, native.decimals),
      },
    );
  }
}

/**
 * Under the wallet's spend lock, with the EVM nonce the lock handed out: refuses a transfer whose planned
 * funds do not cover it once the sends still pending with the nonces from the one the balances were read at
 * (the latest block's) up to this one are taken from them. None of those was mined when the balances were
 * read, so none is in them: each takes its amount and its own fee cap (gas limit × max fee, read from its
 * signed transaction). Without this, simultaneous sends each planned against the whole balance were all
 * admitted, and on EVM those past it reverted on chain, each paying its gas; so did a send made while an
 * earlier one waited in the mempool. Only pending sends count: one confirmed since the balances were read
 * is missed (the rare race that can still over-admit), and so are the rows of a local chain restarted
 * since, whose nonces the new chain never saw.
 */
export async function checkFundsInFlight(
  tx: Tx,
  spend: SpendFacts,
  plan: FundedPlan,
  nonce: number,
): Promise<void> {
  if (!plan.evm) return;
  const readAt = plan.evm.minedNonce ?? plan.evm.pendingNonce;
  if (nonce <= readAt) return;
  const rows = await selectRows<{ token: string; amount: string; raw: string | null }>(
    tx,
    sql`SELECT token, amount_atomic::text AS amount, raw_tx AS raw FROM transactions
        WHERE chain = ${spend.chain} AND from_address = ${spend.from} AND type = 'send' AND status = 'pending'
          AND nonce >= ${readAt} AND nonce < ${nonce}`,
  );
  if (rows.length === 0) return;
  const inFlight = { sends: rows.length, token: 0n, native: 0n };
  for (const row of rows) {
    const amount = BigInt(row.amount);
    if (row.token === spend.token.symbol) inFlight.token += amount;
    if (row.token === plan.funds.native.symbol) inFlight.native += amount;
    inFlight.native += feeCapOf(row.raw) ?? plan.fee;
  }
  checkFunds(spend.token, spend.amount, plan.fee, plan.funds, inFlight);
}

/** The most a signed EVM transaction can pay in fees: its gas limit × its max fee per gas. */
function feeCapOf(raw: string | null): bigint | undefined {
  if (raw === null) return undefined;
  try {
    const parsed = parseTransaction(raw as Hex);
    const perGas = parsed.maxFeePerGas ?? parsed.gasPrice;
    return parsed.gas !== undefined && perGas !== undefined ? parsed.gas * perGas : undefined;
  } catch {
    return undefined;
  }
}
