/**
 * Whether a wallet holds what a transfer takes: the amount and the fee cap. Checked against the balances read
 * when the transfer was planned, before any lock ({@link planFundedTransfer}), and again under the wallet's
 * spend lock against what EVM sends admitted since then took from them, which the chain did not know of
 * when the balances were read ({@link checkFundsInFlight}).
 */
import { sql } from "drizzle-orm";
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
 * funds do not cover it once the sends given the nonces from the plan's pending nonce up to this one are
 * taken from them. The chain had not seen those when the balances were read (its pending count was below
 * them), so none of them is in the balances, whether on chain by now or not; a send that failed took
 * nothing. Without this, simultaneous sends each planned against the whole balance were all admitted, and on
 * EVM those past it reverted on chain, each paying its gas. Every such send asked for the same fee cap as
 * far as this check knows: it takes this plan's.
 */
export async function checkFundsInFlight(
  tx: Tx,
  spend: SpendFacts,
  plan: FundedPlan,
  nonce: number,
): Promise<void> {
  if (!plan.evm || nonce <= plan.evm.pendingNonce) return;
  const rows = await selectRows<{ token: string; amount: string; sends: number }>(
    tx,
    sql`SELECT token, sum(amount_atomic)::text AS amount, count(*)::int AS sends FROM transactions
        WHERE chain = ${spend.chain} AND from_address = ${spend.from} AND type = 'send'
          AND status IN ('pending', 'confirmed') AND nonce >= ${plan.evm.pendingNonce} AND nonce < ${nonce}
        GROUP BY token`,
  );
  const amountOf = (symbol: string) => BigInt(rows.find((row) => row.token === symbol)?.amount ?? "0");
  const sends = rows.reduce((sum, row) => sum + row.sends, 0);
  if (sends === 0) return;
  checkFunds(spend.token, spend.amount, plan.fee, plan.funds, {
    sends,
    token: amountOf(spend.token.symbol),
    native: amountOf(plan.funds.native.symbol) + BigInt(sends) * plan.fee,
  });
}
