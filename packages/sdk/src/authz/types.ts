/** Types of the spend-authorization gate (spec 2.9–2.13, 4.7). */

/**
 * The body of the daemon's `POST /spend/authorize`, in its wire form (spec 2.9).
 * @example
 * const request: SpendAuthorizeRequest = {
 *   provider: "svc", network: "eip155:8453", asset: "0x8335…2913", amount: "1500000",
 *   per_call_cap: "10000000", credits: 150, destination: "0xc202…f741",
 * };
 */
export interface SpendAuthorizeRequest {
  /** Provider tag on the audit row. */
  provider: string;
  /** CAIP-2 network id. */
  network: string;
  /** Token contract or mint address. */
  asset: string;
  /** Atomic units, decimal string. */
  amount: string;
  /** Atomic units, decimal string. */
  per_call_cap: string;
  /** Whole US cents of the spend's value, rounded up, at least 1. */
  credits: number;
  /** Payee address. */
  destination: string;
}

/**
 * The daemon's verdict (spec 2.10).
 * @example
 * const verdict: SpendAuthorizationResult = await client.authorize(request);
 * if (!verdict.approved) console.log(verdict.reason);
 */
export interface SpendAuthorizationResult {
  approved: boolean;
  /** The verdict's id in the daemon's audit chain (`decision_id` on the wire). */
  decisionId: string;
  /** Why it was denied (present on a denial). */
  reason?: string;
}

/**
 * The body of the daemon's `POST /spend/settle`, in its wire form: the same facts as the authorize call.
 * @example
 * await client.settle({ decision_id, provider, network, asset, amount, credits, tx_sig: txHash });
 */
export interface SpendSettleRequest {
  decision_id: string;
  provider: string;
  network: string;
  asset: string;
  amount: string;
  credits: number;
  /** The broadcast's transaction hash (recorded, not matched). */
  tx_sig?: string;
}

/**
 * The daemon's settlement receipt.
 * @example
 * const { receiptId } = await client.settle(request);
 */
export interface SpendSettleResult {
  receiptId: string;
  decisionId: string;
}

/**
 * What became of a cancellation (`POST /spend/cancel`):
 * - `cancelled`: the approval is cancelled and its credits came back (a repeat answers the same);
 * - `released`: the wallet service had consumed the decision, refused the spend before signing anything,
 *   and given it back already, so its credits are back too;
 * - `consumed`: the wallet service consumed the decision for a spend and did not give it back (it may
 *   have signed), so it cannot be cancelled: it is settled once broadcast, or its credits keep counting
 *   until they leave the daemon's budget window.
 * @example
 * const outcome: SpendCancelOutcome = await daemon.cancel(decisionId); // "cancelled"
 */
export type SpendCancelOutcome = "cancelled" | "released" | "consumed";

/**
 * The authorization facts a settlement must repeat (spec 2.12): the provider tag, CAIP-2 network, asset
 * address, atomic amount and credits that were authorized.
 * @example
 * const context: AuthzSettlementContext = { provider: "svc", network, asset, amount: "1500000", credits: 150 };
 */
export interface AuthzSettlementContext {
  provider: string;
  network: string;
  asset: string;
  amount: string;
  credits: number;
}

/**
 * A settlement that failed on every attempt (spec 2.12), kept until it is settled.
 * @example
 * for (const record of svc.authz?.listFailedSettlements() ?? []) console.log(record.decisionId, record.lastError);
 */
export interface FailedSettlementRecord {
  decisionId: string;
  txHash: string;
  context: AuthzSettlementContext;
  /** Message of the last failed attempt. */
  lastError: string;
  /** Total attempts: the first plus every retry (also later manual ones). */
  attempts: number;
  /** ISO 8601 time of the final failure. */
  failedAt: string;
}

/**
 * What the settlement logger receives on each final settlement failure (spec 2.13).
 * @example
 * setAuthzSettlementLogger((log: AuthzSettlementFailureLog) => myLogger.error(log, "settlement failed"));
 */
export interface AuthzSettlementFailureLog {
  decisionId: string;
  provider: string;
  network: string;
  asset: string;
  amount: string;
  credits: number;
  txHash: string;
  error: string;
  attempts: number;
}

/**
 * Where failed settlements are kept. `list` is synchronous (spec 4.7 returns an array); `put` and `remove`
 * may be asynchronous. The SDK ships {@link MemorySettlementStore} (the default) and, for Node,
 * `FileSettlementStore` in `@svc/sdk/node`, which survives a restart.
 * @example
 * const store: FailedSettlementStore = new MemorySettlementStore();
 * const svc = new SvcWallet({ apiKey, authz: { gatewayUrl, token, settlementStore: store } });
 */
export interface FailedSettlementStore {
  /** Every stored record, oldest failure first. */
  list(): FailedSettlementRecord[];
  /** Adds the record, or replaces the one with the same `decisionId`. */
  put(record: FailedSettlementRecord): void | Promise<void>;
  /** Removes the record of `decisionId` (no error when absent). */
  remove(decisionId: string): void | Promise<void>;
}

/**
 * The gate's configuration (spec 2.11), passed as `authz` to the `SvcWallet` constructor.
 * @example
 * const svc = new SvcWallet({
 *   apiKey,
 *   authz: { gatewayUrl: "http://127.0.0.1:8421", token: process.env.AUTHZD_TOKEN!, settlementRetryAttempts: 3 },
 * });
 */
export interface SpendAuthzConfig {
  /** Daemon base URL. */
  gatewayUrl: string;
  /** Daemon bearer token of the identity that spends (needs `wallet.spend.authorize`, `wallet.spend.settle`). */
  token: string;
  /** Provider tag on the audit row; default `svc`. */
  provider?: string;
  /** Atomic per-call cap (decimal string); default the wallet policy's `maxPerTx` in the asset's atomic units. */
  perCallCap?: string;
  /** Retries after the first settlement failure; default 3. */
  settlementRetryAttempts?: number;
  /** Milliseconds between settlement retries; default 100. */
  settlementRetryDelayMs?: number;
  /** Where failed settlements go; default a fresh in-memory store owned by this client. */
  settlementStore?: FailedSettlementStore;
}
