/**
 * Whether a wallet holds what a spend takes: the amount and, for a transfer, the fee cap. Checked against the
 * balances read before any lock (a transfer's when it is planned, {@link planFundedTransfer}; an x402
 * payment's with {@link readPaymentFunds}), and again under the wallet's spend lock against what the spends
 * of its address the chain had not yet taken from those balances take from them ({@link checkFundsInFlight}):
 * its sends not yet mined (EVM) or landed (Solana), and its x402 payments not yet settled.
 */
import { type Hex, parseTransaction } from "viem";
import { chainCall } from "../chains/errors.ts";
import { MAX_SIGNATURE_STATUSES, solanaFeeCap } from "../chains/solana.ts";
import type { ChainClient, ChainConfig, EvmAuthorization, TokenInfo, TransferPlan } from "../chains/types.ts";
import { transactions } from "../internal/db/schema.ts";
import { type Db, namedStatement, type Tx } from "../internal/db/store.ts";
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
  /** EVM: the sender's x402 payments still pending when planned, by transaction id ({@link PaymentsRead}). */
  payments?: PaymentsRead;
  /** EVM: the wallet's last spend admitted when its payments were read ({@link PendingPayments.lastAdmitted}). */
  lastAdmitted?: AdmissionSeq | null | undefined;
  /** Solana: what was read of the sender's spends pending when planned ({@link SolanaSpendsRead}). */
  spends?: SolanaSpendsRead;
  /** Solana: the rents a transfer's fee and what it leaves depend on ({@link SolanaRents}). */
  rents?: SolanaRents;
}

/** A transfer's plan with the funds it was planned against. */
export type FundedPlan = TransferPlan & { funds: PlannedFunds };

/**
 * Of an address's EVM x402 payments recorded pending before its balances were read: whether each was used on
 * chain (settled) when they were read, by transaction id. Used: in the balances already. Not used: not in
 * them, even if it settles (and is confirmed) before the check under the lock.
 */
export type PaymentsRead = ReadonlyMap<string, boolean>;

/**
 * The funds a spend was admitted against before the lock, for the check under it: the balances and, on EVM,
 * the nonce at the block they were read at and what was read of the x402 payments pending then
 * ({@link EvmFundsRead}), on Solana what was read of the spends pending then ({@link SolanaFundsRead}).
 */
export type FundsRead = EvmFundsRead | SolanaFundsRead;

/** The balances a spend was admitted against. */
interface BalancesRead {
  /** Of the token spent. */
  balance: bigint;
  /** A transfer's fee cap and the native coin it is paid in; none for an x402 payment (its facilitator pays). */
  gas?: { fee: bigint; nativeBalance: bigint; native: TokenInfo };
}

/** A Solana spend's balances, and what was read of the sender's spends pending when they were. */
export interface SolanaFundsRead extends BalancesRead {
  spends: SolanaSpendsRead;
  /** A transfer's (with `gas`): the rents its fee and what it leaves depend on. */
  rents?: SolanaRents;
}

/**
 * Of an address's Solana spends (sends and x402 payments) recorded pending before its balances were read, and
 * of its sends confirmed then among the wallet's latest ({@link RECENT_SENDS_READ}): whether each had
 * landed by the slot they were read at (`landed`, by transaction id: in them already; not landed, not in them
 * even if it lands, or had landed where the node reading them had not yet seen it; an x402 payment,
 * whose transaction its facilitator signs first and names, is never read landed), and the wallet's last
 * spend admitted then ({@link AdmissionSeq}: those admitted after it were not read).
 */
export interface SolanaSpendsRead {
  landed: ReadonlyMap<string, boolean>;
  lastAdmitted: AdmissionSeq | null;
}

/** What a Solana transfer pays beside its fee, and what it must leave. */
export interface SolanaRents {
  /** The rent of a token account, which a send opening its recipient's pays. */
  tokenAccountRent: bigint;
  /** The least a wallet may hold unless it holds nothing (an account's rent exemption). */
  rentMinimum: bigint;
}

/** An EVM spend's balances, the nonce they were read at, and what was read of the x402 payments pending then. */
export interface EvmFundsRead extends BalancesRead {
  /** The nonce at the block the balances were read at: the sends from it on are not in them. */
  minedNonce: number;
  payments: PaymentsRead;
  /** The wallet's last spend admitted when its payments were read ({@link PendingPayments.lastAdmitted}). */
  lastAdmitted?: AdmissionSeq | null | undefined;
}

/** What the spends the chain had not taken from the funds read take from them. */
interface InFlight {
  /** Of the token spent: what they take, and how many sends and x402 payments take it. */
  token: bigint;
  sends: number;
  payments: number;
  /** Of the native coin: what the sends take (their amounts of it, and a fee cap each), and how many pay fees. */
  native: bigint;
  feePayers: number;
}

const NOTHING_IN_FLIGHT: InFlight = { token: 0n, sends: 0, payments: 0, native: 0n, feePayers: 0 };

/**
 * x402 payments whose state is read with the balances, at most: the reads ride in the balances' request,
 * whose size providers cap. A payment pending beyond them counts as not yet settled (see {@link checkFundsInFlight}).
 */
export const MAX_PAYMENT_STATE_READS = 16;

/**
 * Refuses, 422 `insufficient_token` or `insufficient_gas`, a spend of `amount` of `token` that the funds
 * (less what is in flight) do not cover with its fee. `fee` undefined: the spend pays none (an x402 payment),
 * and the native coin is not checked.
 */
export function checkFunds(
  spend: { type: SpendFacts["type"]; token: TokenInfo; amount: bigint },
  funds: { balance: bigint; gas?: { fee: bigint; nativeBalance: bigint; native: TokenInfo } | undefined },
  inFlight: InFlight = NOTHING_IN_FLIGHT,
): void {
  const { token, amount } = spend;
  const what = spend.type === "x402" ? "this payment" : "this send";
  const taken = describeSpends(inFlight.sends, inFlight.payments);
  const tokenLeft = funds.balance - inFlight.token;
  if (tokenLeft < amount) {
    throw errors.insufficientFunds(
      "insufficient_token",
      `Insufficient ${token.symbol}: balance ${formatUnits(funds.balance, token.decimals)}${taken === undefined ? "," : `, of which ${formatUnits(inFlight.token, token.decimals)} is taken by ${taken} not yet on chain;`} ${what} needs ${formatUnits(amount, token.decimals)}`,
      {
        token: token.symbol,
        balance: formatUnits(funds.balance, token.decimals),
        required: formatUnits(amount, token.decimals),
      },
    );
  }
  if (!funds.gas) return;
  const { fee, nativeBalance, native } = funds.gas;
  const gasAvailable =
    token.address === null ? funds.balance - inFlight.native - amount : nativeBalance - inFlight.native;
  if (gasAvailable < fee) {
    const payers = describeSpends(inFlight.feePayers, 0);
    throw errors.insufficientFunds(
      "insufficient_gas",
      `Insufficient ${native.symbol} for fees: ${formatUnits(gasAvailable, native.decimals)} available${payers === undefined ? "" : ` once ${payers} not yet on chain are paid for`}, about ${formatUnits(fee, native.decimals)} needed`,
      {
        token: native.symbol,
        available: formatUnits(gasAvailable, native.decimals),
        required: formatUnits(fee, native.decimals),
      },
    );
  }
}

/** "2 sends and 1 x402 payment"; undefined for none. */
function describeSpends(sends: number, payments: number): string | undefined {
  const parts = [
    ...(sends > 0 ? [`${sends} ${sends === 1 ? "send" : "sends"}`] : []),
    ...(payments > 0 ? [`${payments} x402 ${payments === 1 ? "payment" : "payments"}`] : []),
  ];
  return parts.length === 0 ? undefined : parts.join(" and ");
}

/**
 * Where a spend stands in the order its wallet's spends were admitted (`admissionSeq`, handed out under the
 * wallet's spend lock): one admitted after a read of the wallet's spends has a higher one than every spend
 * that read saw, whichever instance admitted it. Dates would not tell: one admitted by an instance whose
 * clock was behind the reader's was dated before spends the read saw, and was missed.
 */
export type AdmissionSeq = bigint;

/**
 * x402 payments pending before the balances were read: their transaction ids, and the authorizations whose
 * states are read with the balances, in order, of the first of them (at most {@link MAX_PAYMENT_STATE_READS}).
 */
export interface PendingPayments {
  /** Every one pending: first those whose authorizations are read, then the rest, read as not yet settled. */
  ids: readonly string[];
  authorizations: readonly EvmAuthorization[];
  /**
   * The wallet's last spend on the chain admitted just before ({@link AdmissionSeq}): those admitted after it
   * were not read (null: none yet). Undefined where nothing was read (not an EVM token).
   */
  lastAdmitted?: AdmissionSeq | null | undefined;
}

const NO_PENDING_PAYMENTS: PendingPayments = { ids: [], authorizations: [] };

/**
 * The x402 payments of `from` (the wallet `walletId`'s address) on an EVM chain still pending now, in
 * `token`, by transaction id, the oldest of them (at most {@link MAX_PAYMENT_STATE_READS}) with the states to
 * read with the balances, and the wallet's last spend there admitted before them: read before the balances,
 * outside any transaction. None on other chains. The ones beyond the reads count as not settled when read:
 * one of them settled and confirmed before the check under the lock is counted then (it was admitted before
 * the last, and no longer pending: counted by nothing else, it let a send of 3 from 20 through beside 20
 * promised).
 */
export async function pendingPayments(
  db: Db,
  chain: ChainConfig,
  sender: { walletId: string; from: string },
  token: TokenInfo,
): Promise<PendingPayments> {
  if (chain.kind !== "evm" || token.address === null) return NO_PENDING_PAYMENTS;
  const { walletId, from } = sender;
  const found = await pendingPaymentsStatement(db, [chain.name, from, token.symbol, walletId]);
  const rows = found.flatMap(({ id, payment }) => (id === null ? [] : [{ id, payment }]));
  const readable = rows.flatMap(({ id, payment }) => {
    const onChain = (payment as { onChain?: Record<string, unknown> } | null)?.onChain;
    const { token, authorizer, nonce } = onChain ?? {};
    return onChain?.kind === "evm" && isHex(token, 20) && isHex(authorizer, 20) && isHex(nonce, 32)
      ? [{ id, authorization: { token, authorizer, nonce } as EvmAuthorization }]
      : [];
  });
  const stateRead = readable.slice(0, MAX_PAYMENT_STATE_READS);
  const read = new Set(stateRead.map((row) => row.id));
  return {
    ids: [...read, ...rows.map((row) => row.id).filter((id) => !read.has(id))],
    authorizations: stateRead.map((row) => row.authorization),
    lastAdmitted: found[0]?.lastAdmitted ?? null,
  };
}

/**
 * An address's x402 payments pending in a token, oldest first (their ids and recorded payments), each beside
 * the wallet's ($4) last spend admitted on the chain (null: none yet): one statement, one snapshot of both.
 * With none pending, one row of the last admitted alone (id null).
 */
const pendingPaymentsStatement = namedStatement<{
  lastAdmitted: AdmissionSeq | null;
  id: string | null;
  payment: unknown;
}>(
  "pending_x402_payments",
  `SELECT ${lastAdmittedSql("$4", "$1")}, pending.id, pending.x402_payment FROM (SELECT 1) one
    LEFT JOIN LATERAL (
      SELECT id, x402_payment, created_at FROM transactions
       WHERE chain = $1 AND from_address = $2 AND type = 'x402' AND status = 'pending' AND token = $3) pending ON true
    ORDER BY pending.created_at, pending.id`,
  [
    [["lastAdmitted"], transactions.admissionSeq],
    [["id"], transactions.id],
    [["payment"], transactions.x402Payment],
  ],
);

/**
 * The last admitted of the wallet's (`wallet`) spends on a chain (`chain`), as an expression: the later of
 * its last send and its last x402 payment, each on its index.
 */
function lastAdmittedSql(wallet: string, chain: string): string {
  const last = (type: string) =>
    `(SELECT max(admission_seq) FROM transactions WHERE wallet_id = ${wallet} AND chain = ${chain} AND type = '${type}')`;
  return `greatest(${last("send")}, ${last("x402")})`;
}

function isHex(value: unknown, bytes: number): value is `0x${string}` {
  return typeof value === "string" && new RegExp(`^0x[0-9a-fA-F]{${bytes * 2}}$`).test(value);
}

/**
 * The wallet's latest sends admitted on a Solana chain, among which those confirmed lately
 * ({@link RECENTLY_CONFIRMED_MS}) have their statuses read with its balances, as those pending do: a node
 * behind the one the confirmer asked (behind a load balancer) may read the balances before such a send
 * landed, and counting only the sends pending admitted a second send of 3 from 5 after the first was
 * confirmed, refused by the chain. Those older than these are taken to be in the balances.
 */
export const RECENT_SENDS_READ = 16;

/**
 * How long after its confirmation a send may be missing from the balances a node reads: SOLANA_NODE_LAG
 * slots, about a minute, and as long again for the block time it is dated by (the chain's clock). One
 * confirmed before is in them, whatever its status reads: none at all from a local chain started anew, whose
 * sends of the chain before would otherwise be counted against the new chain's balances for good.
 */
export const RECENTLY_CONFIRMED_MS = 120_000;

/**
 * An address's Solana spends pending before its balances are read and its sends confirmed lately among the
 * wallet's latest sends ({@link RECENT_SENDS_READ}): their transaction ids, the signatures of the first of
 * its sends (at most the node's bound; pending first) whose statuses are read after the balances, in order,
 * and the wallet's last spend on the chain admitted just before ({@link AdmissionSeq}; null: none yet).
 */
export interface PendingSolanaSpends {
  /**
   * First the sends whose signatures are read, then the rest of those pending, read as not landed (a
   * confirmed send beyond the bound is left out: taken to be in the balances).
   */
  ids: readonly string[];
  signatures: readonly string[];
  lastAdmitted: AdmissionSeq | null;
}

/**
 * The sends and x402 payments of `from` (the wallet `walletId`'s address) on a Solana chain still pending now,
 * its sends confirmed lately among the wallet's latest sends there, and its last spend admitted there: read
 * before the balances, outside any transaction, for the check under the lock ({@link checkFundsInFlight}).
 * Undefined on other chains.
 */
export async function pendingSolanaSpends(
  db: Db,
  chain: ChainConfig,
  sender: { walletId: string; from: string },
): Promise<PendingSolanaSpends | undefined> {
  if (chain.kind !== "solana") return undefined;
  // Against the chain's clock, by which a confirmed send is dated: the real one, never a test's.
  const confirmedSince = new Date(Date.now() - RECENTLY_CONFIRMED_MS);
  const found = await pendingSolanaSpendsStatement(db, [
    chain.name,
    sender.from,
    sender.walletId,
    confirmedSince.toISOString(),
  ]);
  const rows = found.flatMap(({ id, type, txHash, status }) =>
    id === null ? [] : [{ id, type, txHash, status }],
  );
  const read = rows
    .filter((row) => row.type === "send" && row.txHash !== null)
    .slice(0, MAX_SIGNATURE_STATUSES);
  const readIds = new Set(read.map((row) => row.id));
  const unread = rows.filter((row) => row.status === "pending" && !readIds.has(row.id));
  return {
    ids: [...readIds, ...unread.map((row) => row.id)],
    signatures: read.map((row) => row.txHash ?? ""),
    lastAdmitted: found[0]?.lastAdmitted ?? null,
  };
}

/**
 * An address's sends and x402 payments pending on a chain, oldest first, then its sends confirmed after $4
 * among the wallet's ($3) latest sends admitted on the chain ({@link RECENT_SENDS_READ}), oldest first
 * (their ids, types, signatures and states), each beside the wallet's last spend admitted on the chain (null:
 * none yet): one statement, one snapshot of all. With none, one row of the last admitted alone (id null).
 */
const pendingSolanaSpendsStatement = namedStatement<{
  lastAdmitted: AdmissionSeq | null;
  id: string | null;
  type: string | null;
  txHash: string | null;
  status: string | null;
}>(
  "pending_solana_spends",
  // Each part on an index: the sender's pending rows, and the wallet's spends by chain in the order admitted
  // (its last of each type, and its latest sends).
  `SELECT ${lastAdmittedSql("$3", "$1")}, spend.id, spend.type, spend.tx_hash, spend.status FROM (SELECT 1) one
    LEFT JOIN LATERAL (
      SELECT id, type, tx_hash, status, created_at FROM transactions
       WHERE chain = $1 AND from_address = $2 AND type IN ('send', 'x402') AND status = 'pending'
      UNION ALL
      SELECT id, type, tx_hash, status, created_at FROM (
        SELECT id, type, tx_hash, status, created_at, from_address, confirmed_at FROM transactions
         WHERE wallet_id = $3 AND chain = $1 AND type = 'send' AND admission_seq IS NOT NULL
         ORDER BY admission_seq DESC LIMIT ${RECENT_SENDS_READ}) latest
       WHERE status = 'confirmed' AND from_address = $2 AND confirmed_at > $4::timestamptz
    ) spend ON true
    ORDER BY spend.status = 'pending' DESC, spend.created_at, spend.id`,
  [
    [["lastAdmitted"], transactions.admissionSeq],
    [["id"], transactions.id],
    [["type"], transactions.type],
    [["txHash"], transactions.txHash],
    [["status"], transactions.status],
  ],
);

/**
 * Pairs the ids of {@link pendingPayments} with the states read of their authorizations, in order; those
 * beyond the states read, as not used.
 */
export function paymentsRead(ids: readonly string[], used: readonly boolean[] | undefined): PaymentsRead {
  return new Map(ids.map((id, i) => [id, used?.[i] ?? false]));
}

/**
 * Pairs the ids of {@link pendingSolanaSpends} with whether their signatures, read after the balances, had
 * landed by the slot those were read at, in order; those beyond the statuses read, as not landed.
 */
export function solanaSpendsRead(
  pending: PendingSolanaSpends,
  landed: readonly boolean[] | undefined,
): SolanaSpendsRead {
  return {
    landed: new Map(pending.ids.map((id, i) => [id, landed?.[i] ?? false])),
    lastAdmitted: pending.lastAdmitted,
  };
}

/**
 * An x402 payment's funds, read before the lock. On EVM: the pending payments' states, the nonce at the
 * latest block and the balance there, in one request to the node (after one query of the store). On Solana:
 * the balance and, after it, the statuses of the address's sends pending (after one query of the store).
 * Undefined on a chain without either read, whose payment is checked against its balance alone.
 */
export async function readPaymentFunds(
  db: Db,
  client: ChainClient,
  sender: { walletId: string; from: string },
  token: TokenInfo,
): Promise<FundsRead | undefined> {
  const getBalanceWithLanded = client.getBalanceWithLanded?.bind(client);
  if (getBalanceWithLanded) {
    const pending = await pendingSolanaSpends(db, client.config, sender);
    if (!pending) return undefined;
    const read = await chainCall(client.config.name, () =>
      getBalanceWithLanded(sender.from, token, pending.signatures),
    );
    return { balance: read.balance, spends: solanaSpendsRead(pending, read.signaturesLanded) };
  }
  const getFundsRead = client.getFundsRead?.bind(client);
  if (!getFundsRead) return undefined;
  const pending = await pendingPayments(db, client.config, sender, token);
  const read = await chainCall(client.config.name, () =>
    getFundsRead(sender.from, token, pending.authorizations),
  );
  return {
    balance: read.balance,
    minedNonce: read.minedNonce,
    payments: paymentsRead(pending.ids, read.authorizationsUsed),
    lastAdmitted: pending.lastAdmitted,
  };
}

/** The funds a transfer's plan was made against, for {@link checkFundsInFlight}; undefined when none were read. */
export function fundsReadOf(plan: FundedPlan): FundsRead | undefined {
  const gas = { fee: plan.fee, nativeBalance: plan.funds.nativeBalance, native: plan.funds.native };
  if (plan.funds.spends)
    return {
      balance: plan.funds.balance,
      gas,
      spends: plan.funds.spends,
      ...(plan.funds.rents ? { rents: plan.funds.rents } : {}),
    };
  if (!plan.evm) return undefined;
  return {
    balance: plan.funds.balance,
    gas: { fee: plan.fee, nativeBalance: plan.funds.nativeBalance, native: plan.funds.native },
    minedNonce: plan.evm.minedNonce ?? plan.evm.pendingNonce,
    payments: plan.funds.payments ?? new Map(),
    lastAdmitted: plan.funds.lastAdmitted,
  };
}

/**
 * Under the wallet's spend lock: refuses an EVM spend whose funds read before the lock do not cover it once
 * what the address's other spends the chain had not taken from them when read are taken as well.
 *
 * Sends: those with a nonce from the one the balances were read at (the latest block's) on, up to `nonce`,
 * the one the lock handed this spend (a transfer), or to the last one handed out (an x402 payment, which has
 * none), pending or confirmed since. None of those was mined when the balances were read, so none is in them:
 * each takes its amount and its own fee cap (gas limit × max fee, read from its signed transaction). A send
 * confirmed between the read and the lock counts too: a request waits its turn at the lock while the sends
 * before it are mined and confirmed (by any instance's confirmer), and counting only pending ones admitted a
 * burst far past the balance. Of the rows holding one nonce, the latest counts, if it is live: a local chain
 * restarted hands the nonces out again, and the old chain's confirmed rows are not in flight on the new one,
 * also when the new chain's send of that nonce failed (rejected at broadcast, its gap not yet filled).
 *
 * x402 payments in the token spent (EIP-3009 authorizations, which the resource's facilitator submits and
 * the wallet pays no gas for): a row stays pending until the confirmer learns how the payment ended, so one
 * already settled may still be pending. Their states were read with the balances, before them in the same
 * request ({@link PaymentsRead}): a payment used then is in the balances and does not count; one not used
 * then, or pending then beyond the reads' bound (its state not read), counts while pending and also once
 * confirmed since (it settled after the read, or may have). A payment admitted after that read counts while
 * pending, and also once confirmed when admitted after the wallet's last spend admitted then
 * ({@link AdmissionSeq}; it was made while this spend waited: settled and confirmed by the time it takes the
 * lock, it was in neither): it may have settled before the balances were read, and is then counted twice,
 * refusing briefly what a later read would admit. One failed or expired does not count: it can no longer
 * settle.
 *
 * Without this, simultaneous spends each checked against the whole balance were all admitted: an EVM send
 * past it reverted on chain, paying its gas, and an x402 payment past it was never settled, the resource
 * served unpaid or not at all.
 */
export async function checkFundsInFlight(
  tx: Tx,
  spend: SpendFacts,
  read: FundsRead,
  nonce?: number,
): Promise<void> {
  if ("spends" in read) return checkSolanaSpendsInFlight(tx, spend, read);
  const readUnused = [...read.payments].filter(([, used]) => !used).map(([id]) => id);
  const { lastAdmitted } = read;
  const rows = await inFlightStatement(tx, [
    spend.chain,
    spend.from,
    read.minedNonce,
    nonce ?? null,
    spend.token.symbol,
    JSON.stringify(readUnused),
    spend.walletId,
    lastAdmitted !== undefined,
    lastAdmitted?.toString() ?? null,
    JSON.stringify([...read.payments.keys()]),
  ]);
  const sends = rows.filter((row) => row.type === "send");
  const payments = rows.filter((row) => row.type === "x402");
  const inFlight = { ...NOTHING_IN_FLIGHT };
  const native = read.gas?.native.symbol;
  for (const row of sends) {
    const amount = row.amount;
    if (row.token === spend.token.symbol) {
      inFlight.token += amount;
      inFlight.sends++;
    }
    if (row.token === native) inFlight.native += amount;
    inFlight.native += feeCapOf(row.raw) ?? read.gas?.fee ?? 0n;
    inFlight.feePayers++;
  }
  for (const row of payments) {
    if (read.payments.get(row.id) === true) continue;
    inFlight.token += row.amount;
    inFlight.payments++;
  }
  if (inFlight.sends + inFlight.payments + inFlight.feePayers === 0) return;
  checkFunds(spend, read, inFlight);
}

/** A spend in flight as both funds checks' statements read it. */
interface InFlightRow {
  type: string;
  id: string;
  token: string;
  amount: bigint;
  raw: string | null;
}
const inFlightFields = [
  [["type"], transactions.type],
  [["id"], transactions.id],
  [["token"], transactions.token],
  [["amount"], transactions.amountAtomic],
  [["raw"], transactions.rawTx],
] as const;

/**
 * An address's spends in flight on a chain, in one statement: its sends pending or confirmed with a nonce
 * from $3 (the one at the block the balances were read at) up to $4 (the one handed out; for an x402 payment,
 * none: up to the address's next nonce, so the rows of a local chain restarted, whose nonces were forgotten,
 * are not), the latest row of each nonce when it is live, and its x402 payments in the token spent ($5)
 * pending, or confirmed since the read among those read unused ($6, a JSON array of ids), or (when $8)
 * confirmed and admitted in the wallet ($7) after its last spend admitted at the read ($9; none then: every
 * one), other than those read ($10).
 */
const inFlightStatement = namedStatement<InFlightRow>(
  "spends_in_flight",
  // Four branches, each on an index (the sender's nonces, the sender's pending rows, the primary key, the
  // wallet's spends by chain in the order admitted): one OR of them read every row. The last one's bound is
  // one comparison (none then: from 0), which the index seeks to; "IS NULL OR" beside it read every spend of
  // the wallet.
  `SELECT type, id, token, amount_atomic, raw_tx FROM (
     SELECT DISTINCT ON (nonce) type, id, token, amount_atomic, raw_tx, status FROM transactions
      WHERE chain = $1 AND from_address = $2 AND nonce >= $3::int
        AND nonce < coalesce($4::int, (SELECT next_nonce FROM evm_nonces WHERE chain = $1 AND address = $2))
        AND type = 'send'
      ORDER BY nonce, created_at DESC, id DESC) sends
    WHERE status IN ('pending', 'confirmed')
   UNION ALL
   SELECT type, id, token, amount_atomic, raw_tx FROM transactions
    WHERE status = 'pending' AND chain = $1 AND from_address = $2 AND type = 'x402' AND token = $5
   UNION ALL
   SELECT type, id, token, amount_atomic, raw_tx FROM transactions
    WHERE status = 'confirmed' AND id = ANY (ARRAY(SELECT jsonb_array_elements_text($6::jsonb)))
      AND type = 'x402' AND chain = $1 AND from_address = $2 AND token = $5
   UNION ALL
   SELECT type, id, token, amount_atomic, raw_tx FROM transactions
    WHERE $8::boolean AND wallet_id = $7 AND chain = $1 AND admission_seq > coalesce($9::bigint, 0)
      AND type = 'x402' AND status = 'confirmed' AND from_address = $2 AND token = $5
      AND NOT id = ANY (ARRAY(SELECT jsonb_array_elements_text($10::jsonb)))`,
  inFlightFields,
);

/**
 * Under the wallet's spend lock: refuses a Solana spend whose funds read before the lock do not cover it once
 * what the address's other spends the chain had not taken from them when read take as well.
 *
 * A Solana transfer has no nonce that tells which sends the balances hold: the slot they were read at does.
 * The sends pending before the read, and those confirmed among the wallet's latest sends, had their
 * statuses read after it ({@link SolanaSpendsRead}): one landed by that slot, in a confirmed block, is in the
 * balances and does not count, though still pending; one not landed then counts while pending and also once
 * confirmed (since, or before the read by a node ahead of the one that read the balances). x402 payments (transactions their
 * facilitator signs first and names, whose state a read of the balances cannot tell) count the same way as
 * sends not landed: pending, or pending then and confirmed since; one settled before the read is counted
 * twice while its row is pending, briefly (the paid request that settled it confirms it). A spend admitted
 * after the read counts while pending, and also once confirmed when admitted after the wallet's last spend
 * admitted then ({@link AdmissionSeq}; it was admitted while this spend waited its turn at the lock: landed
 * and confirmed meanwhile, it was in neither the balances nor the spends read; one that landed before the
 * balances were read is then counted twice, refusing briefly what a later read admits). A send takes its
 * amount and what it takes from the native coin beyond it: the fee of its signatures and the rent of a token
 * account it opens ({@link solanaFeeCap}, from its signed transaction); an x402 payment its amount in the
 * token spent (its facilitator pays the fee).
 * A failed one does not count: it no longer lands, or it landed and its fee was taken before the read or is
 * at most what the check missed of one spend. A transfer must also leave the wallet its rent exemption, or
 * nothing ({@link checkSenderRentInFlight}).
 *
 * The local devnet's reads hold the transactions of its newest slot while naming the slot before it (LiteSVM
 * keeps one state): there a send landed in the newest slot before the read counts as well, refusing for one
 * slot (100 ms) what is admitted after it. Counted twice, never missed.
 *
 * Without this, simultaneous spends each checked against the whole balance were all admitted: of 8 sends of
 * 1 USDC from 3, 3 were confirmed and 5 refused by the node's preflight, answered 502 `broadcast_rejected` and
 * left `failed` in the wallet's history (a preflight that has not yet seen the others would let them land,
 * failed on chain, each paying its fee); a send beside an x402 payment not yet settled, or a payment beside
 * either, was admitted, and the payment could no longer be settled.
 */
async function checkSolanaSpendsInFlight(tx: Tx, spend: SpendFacts, read: SolanaFundsRead): Promise<void> {
  const { landed, lastAdmitted } = read.spends;
  const readUnlanded = [...landed].filter(([, inBalances]) => !inBalances).map(([id]) => id);
  const rows = await solanaInFlightStatement(tx, [
    spend.chain,
    spend.from,
    JSON.stringify(readUnlanded),
    spend.walletId,
    lastAdmitted?.toString() ?? null,
    JSON.stringify([...landed.keys()]),
  ]);
  const inFlight = { ...NOTHING_IN_FLIGHT };
  const native = read.gas?.native.symbol;
  for (const row of rows) {
    if (landed.get(row.id) === true) continue;
    if (row.type === "x402") {
      if (row.token !== spend.token.symbol) continue;
      inFlight.token += row.amount;
      inFlight.payments++;
      continue;
    }
    if (row.token === spend.token.symbol) {
      inFlight.token += row.amount;
      inFlight.sends++;
    }
    if (row.token === native) inFlight.native += row.amount;
    const feeCap = row.raw === null ? undefined : solanaFeeCap(row.raw, read.rents?.tokenAccountRent ?? 0n);
    inFlight.native += feeCap ?? read.gas?.fee ?? 0n;
    inFlight.feePayers++;
  }
  if (inFlight.sends + inFlight.payments + inFlight.feePayers === 0) return;
  checkFunds(spend, read, inFlight);
  checkSenderRentInFlight(spend, read, inFlight);
}

/**
 * Refuses (400 `below_rent_minimum`) a Solana transfer that, once the sends in flight are paid for, would
 * leave its wallet holding more than nothing but less than an account's rent exemption, after its fee or
 * after its SOL: the chain refuses it, as checkRentExemption (transfer.ts) says before the lock of the
 * balances alone.
 */
function checkSenderRentInFlight(spend: SpendFacts, read: SolanaFundsRead, inFlight: InFlight): void {
  if (!read.gas || !read.rents || inFlight.feePayers === 0) return;
  const { fee, nativeBalance, native } = read.gas;
  const minimum = read.rents.rentMinimum;
  const sendsNative = spend.token.address === null;
  const afterFee = (sendsNative ? read.balance : nativeBalance) - inFlight.native - fee;
  const left = [afterFee, ...(sendsNative ? [afterFee - spend.amount] : [])].find(
    (held) => held > 0n && held < minimum,
  );
  if (left === undefined) return;
  const fmt = (atomic: bigint) => formatUnits(atomic, native.decimals);
  throw errors.belowRentMinimum(
    `${spend.chain} refuses a transfer that leaves an account holding less than ${fmt(minimum)} ${native.symbol} (its rent exemption) but more than nothing: this wallet would keep ${fmt(left)} once this send and ${describeSpends(inFlight.feePayers, 0)} not yet on chain are paid for`,
    {
      chain: spend.chain,
      account: "sender",
      token: native.symbol,
      minimum: fmt(minimum),
      resulting: fmt(left),
    },
  );
}

/**
 * An address's Solana sends and x402 payments in flight on a chain, in one statement: those pending, those
 * confirmed among those read not landed ($3, a JSON array of ids), and those confirmed and admitted in the
 * wallet ($4) after its last spend admitted at the read ($5; none then: every one), other than those read
 * ($6).
 */
const solanaInFlightStatement = namedStatement<InFlightRow>(
  "solana_spends_in_flight",
  // Three branches, each on an index (the sender's pending rows, the primary key, the wallet's spends by
  // chain in the order admitted), as the EVM statement's.
  `SELECT type, id, token, amount_atomic, raw_tx FROM transactions
    WHERE status = 'pending' AND chain = $1 AND from_address = $2 AND type IN ('send', 'x402')
   UNION ALL
   SELECT type, id, token, amount_atomic, raw_tx FROM transactions
    WHERE status = 'confirmed' AND id = ANY (ARRAY(SELECT jsonb_array_elements_text($3::jsonb)))
      AND type IN ('send', 'x402') AND chain = $1 AND from_address = $2
   UNION ALL
   SELECT type, id, token, amount_atomic, raw_tx FROM transactions
    WHERE wallet_id = $4 AND chain = $1 AND admission_seq > coalesce($5::bigint, 0)
      AND type IN ('send', 'x402') AND status = 'confirmed' AND from_address = $2
      AND NOT id = ANY (ARRAY(SELECT jsonb_array_elements_text($6::jsonb)))`,
  inFlightFields,
);

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
