import { SvcAuthzError, SvcError, SvcSpendDeniedError } from "../errors.ts";
import { type FetchLike, sleep } from "../transport.ts";
import { SpendAuthzClient } from "./client.ts";
import { logSettlementFailure } from "./logger.ts";
import { MemorySettlementStore } from "./store.ts";
import type {
  AuthzSettlementContext,
  FailedSettlementRecord,
  FailedSettlementStore,
  SpendAuthzConfig,
} from "./types.ts";

/**
 * The provider tag the SDK puts on audit rows unless `authz.provider` says otherwise.
 * @example
 * new SvcWallet({ apiKey, authz: { gatewayUrl, token, provider: DEFAULT_PROVIDER } }); // "svc"
 */
export const DEFAULT_PROVIDER = "svc";
const DEFAULT_SETTLEMENT_RETRY_ATTEMPTS = 3;
const DEFAULT_SETTLEMENT_RETRY_DELAY_MS = 100;
const CONFIG_KEYS = new Set([
  "gatewayUrl",
  "token",
  "provider",
  "perCallCap",
  "settlementRetryAttempts",
  "settlementRetryDelayMs",
  "settlementStore",
]);

/**
 * One spend as the gate sees it: the facts to authorize (and later settle) and where the money goes. The
 * payer of a send and (later) of an x402 payment are both described this way.
 * @example
 * const spend: GatedSpend = { context: { provider: "svc", network, asset, amount: "1000000", credits: 100 }, destination, perCallCap: "10000000" };
 */
export interface GatedSpend {
  context: AuthzSettlementContext;
  /** Payee address. */
  destination: string;
  /** Atomic per-call cap for this spend. */
  perCallCap: string;
}

function misconfigured(message: string): SvcAuthzError {
  return new SvcAuthzError(message, { reason: "misconfigured" });
}

/**
 * True when the service refused the spend for good, so nothing moved and the approval can be given back: a
 * 4xx answer, except "the first request with this Idempotency-Key is still running" (that one may yet move
 * money). No answer or a 5xx may hide a spend that happened: the approval stays.
 */
function definiteRefusal(error: unknown): boolean {
  return (
    error instanceof SvcError &&
    error.status >= 400 &&
    error.status < 500 &&
    error.reason !== "idempotency_key_in_use"
  );
}

/**
 * The credits the service counts a spend as worth, when it refused the spend's decision for stating fewer
 * (`spend_authorization_mismatch` on `credits`, `details.requested`) than that; else undefined.
 */
function creditsCounted(error: unknown, asked: number): number | undefined {
  if (!(error instanceof SvcError) || error.reason !== "spend_authorization_mismatch") return undefined;
  if (error.details?.field !== "credits") return undefined;
  const requested = Number(error.details.requested);
  return Number.isSafeInteger(requested) && requested > asked ? requested : undefined;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * The gate (spec 2.11, 4.8): authorizes each spend with the daemon before it is submitted, settles it after
 * its broadcast (with retries), and keeps the settlements that kept failing. `SvcWallet` builds one from its
 * `authz` config and exposes it as `svc.authz`; use it directly for payment paths of your own.
 * @example
 * const gate = new SpendGate({ gatewayUrl: "http://127.0.0.1:8421", token });
 * const tx = await gate.run(spend, (decisionId) => submitMySpend(decisionId), (result) => result.txHash);
 */
export class SpendGate {
  /** The low-level daemon client this gate wraps. */
  readonly client: SpendAuthzClient;
  /** Provider tag on the audit rows. */
  readonly provider: string;
  /** `authz.perCallCap`, when set. */
  readonly perCallCap: string | undefined;
  readonly settlementRetryAttempts: number;
  readonly settlementRetryDelayMs: number;
  readonly #store: FailedSettlementStore;
  /** Per wallet: its policy's `maxPerTx` (USD, null = none), read once and kept until a policy change. */
  readonly #maxPerTx = new Map<string, Promise<string | null>>();
  /**
   * Spends the service held for an owner's approval, by transaction id: their decisions are settled once
   * the approved spend is broadcast (see {@link settleHeld}).
   */
  readonly #held = new Map<string, { decisionId: string; context: AuthzSettlementContext }>();

  constructor(config: SpendAuthzConfig, options: { fetch?: FetchLike; timeoutMs?: number } = {}) {
    if (config === null || typeof config !== "object") throw misconfigured("authz must be an object");
    for (const key of Object.keys(config)) {
      if (!CONFIG_KEYS.has(key)) {
        throw misconfigured(
          `Unknown authz option ${JSON.stringify(key)}; known: ${[...CONFIG_KEYS].join(", ")}`,
        );
      }
    }
    if (config.provider !== undefined && (typeof config.provider !== "string" || config.provider === "")) {
      throw misconfigured("authz.provider must be a non-empty string");
    }
    if (config.perCallCap !== undefined && !/^(0|[1-9]\d*)$/.test(String(config.perCallCap))) {
      throw misconfigured('authz.perCallCap must be an atomic-unit decimal string, e.g. "10000000"');
    }
    const retries = config.settlementRetryAttempts ?? DEFAULT_SETTLEMENT_RETRY_ATTEMPTS;
    if (!Number.isSafeInteger(retries) || retries < 0) {
      throw misconfigured("authz.settlementRetryAttempts must be a non-negative integer");
    }
    const delay = config.settlementRetryDelayMs ?? DEFAULT_SETTLEMENT_RETRY_DELAY_MS;
    if (typeof delay !== "number" || !Number.isFinite(delay) || delay < 0) {
      throw misconfigured("authz.settlementRetryDelayMs must be a non-negative number");
    }
    const store = config.settlementStore;
    if (
      store !== undefined &&
      (typeof store?.list !== "function" ||
        typeof store.put !== "function" ||
        typeof store.remove !== "function")
    ) {
      throw misconfigured("authz.settlementStore must have list(), put() and remove()");
    }
    this.client = new SpendAuthzClient({
      gatewayUrl: config.gatewayUrl,
      token: config.token,
      ...(options.fetch ? { fetch: options.fetch } : {}),
      ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
    });
    this.provider = config.provider ?? DEFAULT_PROVIDER;
    this.perCallCap = config.perCallCap;
    this.settlementRetryAttempts = retries;
    this.settlementRetryDelayMs = delay;
    this.#store = store ?? new MemorySettlementStore();
  }

  /**
   * Runs one gated spend (rules 4.8.1, 3, 4, 6, 8): authorize; on a denial throw {@link SvcSpendDeniedError}
   * and submit nothing; submit with the decision id; if the service refuses it (a 4xx answer), cancel the
   * approval so its credits come back and rethrow; after a broadcast (a `txHash`), settle with the same
   * facts. Resolves once settlement, with its retries, has finished; its result is the submit's either way.
   *
   * A spend the service counts as worth more credits than asked for (a Solana send that opens its
   * recipient's token account gives it that account's rent, which the service counts as spent) is refused
   * saying how many: the gate then asks the daemon again, once, for that many, and submits again.
   *
   * `decisionOf` reads the decision the service recorded the spend with: a retry of a spend whose answer
   * was lost (the same Idempotency-Key) is answered with the first attempt's spend and decision. That one
   * is settled, and this attempt's approval, which the service never used, cancelled.
   * @example
   * const tx = await gate.run(spend, (decisionId) => postSend(decisionId), (tx) => tx.txHash);
   */
  async run<T>(
    spend: GatedSpend,
    submit: (decisionId: string) => Promise<T>,
    txHashOf: (result: T) => string | undefined,
    heldIdOf?: (result: T) => string | undefined,
    decisionOf?: (result: T) => string | undefined,
  ): Promise<T> {
    let asked = await this.authorize(spend);
    let result: T;
    try {
      result = await this.#submit(asked, submit);
    } catch (error) {
      const credits = creditsCounted(error, spend.context.credits);
      if (credits === undefined) throw error;
      spend = { ...spend, context: { ...spend.context, credits } };
      asked = await this.authorize(spend);
      result = await this.#submit(asked, submit);
    }
    const decisionId = decisionOf?.(result) ?? asked;
    if (decisionId !== asked) await this.cancel(asked);
    const txHash = txHashOf(result);
    if (txHash !== undefined) await this.settle(decisionId, txHash, spend.context);
    else {
      // Held for an owner's approval: nothing is broadcast yet, so there is nothing to settle yet.
      const heldId = heldIdOf?.(result);
      if (heldId !== undefined) this.#held.set(heldId, { decisionId, context: { ...spend.context } });
    }
    return result;
  }

  /** Submits with `decisionId`; on a definite refusal, cancels the approval so its credits come back. */
  async #submit<T>(decisionId: string, submit: (decisionId: string) => Promise<T>): Promise<T> {
    try {
      return await submit(decisionId);
    } catch (error) {
      if (definiteRefusal(error)) await this.cancel(decisionId);
      throw error;
    }
  }

  /**
   * Settles the decision of a spend that was held for approval, once it is broadcast (it has a `txHash`),
   * like {@link settle}; forgets it when it ended without being broadcast (rejected or expired: the service
   * gave the decision back). Does nothing for a transaction this gate did not see held. Never throws.
   * `wallet.waitForTransaction` calls it on every read.
   * @example
   * await gate.settleHeld(await svc.transactions.get(held.id));
   */
  async settleHeld(tx: { id: string; status: string; txHash?: string | undefined }): Promise<void> {
    const held = this.#held.get(tx.id);
    if (held === undefined) return;
    if (tx.txHash !== undefined && tx.status !== "pending_approval") {
      this.#held.delete(tx.id);
      await this.settle(held.decisionId, tx.txHash, held.context);
    } else if (tx.status === "rejected" || tx.status === "failed") {
      this.#held.delete(tx.id);
    }
  }

  /**
   * The decisions of spends held for approval that this gate has not settled yet, by transaction id.
   * @example
   * for (const { transactionId } of svc.authz.listHeldSpends()) await wallet.waitForTransaction(transactionId);
   */
  listHeldSpends(): { transactionId: string; decisionId: string }[] {
    return [...this.#held].map(([transactionId, { decisionId }]) => ({ transactionId, decisionId }));
  }

  /**
   * Asks the daemon (rule 4.8.1) and returns the decision id of an approval; a denial throws
   * {@link SvcSpendDeniedError}, a daemon problem {@link SvcAuthzError}.
   * @example
   * const decisionId = await gate.authorize(spend);
   */
  async authorize(spend: GatedSpend): Promise<string> {
    const verdict = await this.client.authorize({
      provider: spend.context.provider,
      network: spend.context.network,
      asset: spend.context.asset,
      amount: spend.context.amount,
      per_call_cap: spend.perCallCap,
      credits: spend.context.credits,
      destination: spend.destination,
    });
    if (!verdict.approved) throw new SvcSpendDeniedError(verdict.reason ?? "denied", verdict.decisionId);
    return verdict.decisionId;
  }

  /**
   * Settles a broadcast spend with its authorized facts (rule 4.8.6): one attempt plus
   * `settlementRetryAttempts` retries, `settlementRetryDelayMs` apart. When every attempt fails (whatever
   * the error), the failure goes to the settlement logger and into the store (rule 4.8.8). Never throws;
   * resolves true when settled.
   * @example
   * const settled = await gate.settle(decisionId, txHash, context);
   */
  async settle(decisionId: string, txHash: string, context: AuthzSettlementContext): Promise<boolean> {
    const attempts = 1 + this.settlementRetryAttempts;
    let lastError = "";
    for (let attempt = 1; attempt <= attempts; attempt++) {
      try {
        await this.#settleOnce(decisionId, txHash, context);
        return true;
      } catch (error) {
        lastError = messageOf(error);
      }
      if (attempt < attempts) await sleep(this.settlementRetryDelayMs);
    }
    logSettlementFailure({ decisionId, ...context, txHash, error: lastError, attempts });
    try {
      await this.#store.put({
        decisionId,
        txHash,
        context: { ...context },
        lastError,
        attempts,
        failedAt: new Date().toISOString(),
      });
    } catch {
      // The logger already has every fact needed to settle by hand; a failing store must not fail the payment.
    }
    return false;
  }

  /**
   * Cancels an approval that will not be settled (`POST /spend/cancel`), so its credits come back. Never
   * throws: resolves true when the credits are back (cancelled now or before, or already given back by
   * the wallet service that refused the spend), false when they are not (the service consumed the
   * decision and keeps it, or the daemon could not be asked or refused).
   * @example
   * await gate.cancel(decisionId);
   */
  async cancel(decisionId: string): Promise<boolean> {
    try {
      return (await this.client.cancel(decisionId)) !== "consumed";
    } catch {
      return false;
    }
  }

  /**
   * The atomic per-call cap for a spend (rule 4.8.7): `perCallCap` when configured, else the wallet's
   * policy `maxPerTx` converted by `toAtomic`. The policy is read once per wallet and kept until
   * {@link invalidateCap}.
   * @example
   * const cap = await gate.capFor(wallet.id, () => wallet.policy.get().then((p) => p.maxPerTx), toAtomic);
   */
  async capFor(
    walletId: string,
    readMaxPerTx: () => Promise<string | null>,
    toAtomic: (maxPerTxUsd: string) => bigint | undefined,
  ): Promise<string> {
    if (this.perCallCap !== undefined) return this.perCallCap;
    let cached = this.#maxPerTx.get(walletId);
    if (cached === undefined) {
      cached = readMaxPerTx();
      this.#maxPerTx.set(walletId, cached);
      // A failed read is not kept: the next spend reads again.
      cached.catch(() => {
        if (this.#maxPerTx.get(walletId) === cached) this.#maxPerTx.delete(walletId);
      });
    }
    const maxPerTx = await cached;
    if (maxPerTx === null) {
      throw misconfigured(
        `No per-call cap for wallet ${walletId}: its policy has no maxPerTx and authz.perCallCap is not set`,
      );
    }
    const cap = toAtomic(maxPerTx);
    if (cap === undefined) {
      throw misconfigured(
        `Cannot convert maxPerTx $${maxPerTx} of wallet ${walletId} to the asset: no USD price`,
      );
    }
    return cap.toString();
  }

  /**
   * Forgets the cached cap of a wallet (its policy changed). `wallet.policy.update`, `pause` and `resume` call it.
   * @example
   * gate.invalidateCap(wallet.id);
   */
  invalidateCap(walletId: string): void {
    this.#maxPerTx.delete(walletId);
  }

  /**
   * The settlements that failed on every attempt and are not settled yet (spec 4.7).
   * @example
   * const pending = svc.authz.listFailedSettlements();
   */
  listFailedSettlements(): FailedSettlementRecord[] {
    return this.#store.list();
  }

  /**
   * Settles a stored failed settlement once more: no rebroadcast, no reauthorization. True on success (the
   * record leaves the list); false when it failed again (the record counts the attempt) or is unknown.
   * @example
   * for (const { decisionId } of svc.authz.listFailedSettlements()) await svc.authz.retryFailedSettlement(decisionId);
   */
  async retryFailedSettlement(decisionId: string): Promise<boolean> {
    const record = this.#store.list().find((candidate) => candidate.decisionId === decisionId);
    if (record === undefined) return false;
    try {
      await this.#settleOnce(record.decisionId, record.txHash, record.context);
    } catch (error) {
      await this.#store.put({
        ...record,
        lastError: messageOf(error),
        attempts: record.attempts + 1,
        failedAt: new Date().toISOString(),
      });
      return false;
    }
    await this.#store.remove(decisionId);
    return true;
  }

  /**
   * {@link retryFailedSettlement} for the most recent failure; false when there is none.
   * @example
   * if (await svc.authz.retryLatestFailedSettlement()) console.log("settled");
   */
  async retryLatestFailedSettlement(): Promise<boolean> {
    const records = this.#store.list();
    let latest: FailedSettlementRecord | undefined;
    for (const record of records)
      if (latest === undefined || record.failedAt >= latest.failedAt) latest = record;
    return latest === undefined ? false : this.retryFailedSettlement(latest.decisionId);
  }

  async #settleOnce(decisionId: string, txHash: string, context: AuthzSettlementContext): Promise<void> {
    await this.client.settle({
      decision_id: decisionId,
      provider: context.provider,
      network: context.network,
      asset: context.asset,
      amount: context.amount,
      credits: context.credits,
      tx_sig: txHash,
    });
  }
}
