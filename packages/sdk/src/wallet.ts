import { creditsFor, decimalFromNumber, toAtomic, toDecimalAmount, usdToAtomicCap } from "./amounts.ts";
import type { GatedSpend, SpendGate } from "./authz/gate.ts";
import {
  SvcAuthzError,
  SvcConnectionError,
  SvcPaymentRejectedError,
  SvcValidationError,
  SvcWaitTimeoutError,
} from "./errors.ts";
import type { NetworkDirectory, TokenFacts } from "./network.ts";
import { pathSegment, sleep, type Transport } from "./transport.ts";
import type {
  Balance,
  FaucetInput,
  PaidFetchResult,
  Policy,
  PolicyInput,
  RequestOptions,
  SendInput,
  Transaction,
  TransactionPage,
  TransactionQuery,
  TransactionStatus,
  WaitForTransactionOptions,
  WalletRecord,
  WalletSpending,
  X402FetchInit,
} from "./types.ts";
import {
  chooseRequirement,
  type PaidResponse,
  parseX402Challenge,
  rejectionReason,
  responseFromPaidFetch,
} from "./x402.ts";

/** What wallet objects share with their `SvcWallet`. */
export interface ClientContext {
  transport: Transport;
  network: NetworkDirectory;
  gate: SpendGate | undefined;
}

const FETCH_KEYS = new Set(["method", "headers", "body", "chain", "maxAmount", "idempotencyKey", "signal"]);
const FETCH_METHODS = new Set(["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"]);
const DECIMAL_AMOUNT = /^(0|[1-9]\d{0,30})(\.\d{1,18})?$/;
const TRANSACTION_STATUSES = new Set<TransactionStatus>([
  "pending_approval",
  "pending",
  "confirmed",
  "failed",
  "rejected",
]);
/** Statuses a transaction never leaves. */
const FINAL_STATUSES = new Set<TransactionStatus>(["confirmed", "failed", "rejected"]);
const DEFAULT_WAIT_TIMEOUT_MS = 60_000;
const DEFAULT_WAIT_INTERVAL_MS = 1_000;

/** Atomic units as whole tokens, e.g. 10000n with 6 decimals → "0.01". */
function formatAtomic(amount: bigint, decimals: number): string {
  const scale = 10n ** BigInt(decimals);
  const fraction = (amount % scale).toString().padStart(decimals, "0").replace(/0+$/, "");
  return fraction === "" ? (amount / scale).toString() : `${amount / scale}.${fraction}`;
}

/** Whole tokens (a checked decimal string) in atomic units, digits beyond the token's decimals dropped. */
function atomicFloor(decimal: string, decimals: number): bigint {
  const [whole = "0", fraction = ""] = decimal.split(".");
  return toAtomic(
    fraction === "" ? whole : `${whole}.${fraction.slice(0, decimals)}`.replace(/\.$/, ""),
    decimals,
  );
}

/**
 * A page of history that is also an async iterator over every transaction from there on (fetching the
 * following pages as it goes), and offers `pages()` to iterate page by page.
 * @example
 * const page = await wallet.transactions({ limit: 10 });
 * for await (const tx of wallet.transactions({ type: "send" })) console.log(tx.id, tx.amount);
 */
export type TransactionList = Promise<TransactionPage> &
  AsyncIterable<Transaction> & {
    /** Every page from the query's offset on. */
    pages(): AsyncIterable<TransactionPage>;
  };

function invalid(message: string, reason = "invalid_input"): SvcValidationError {
  return new SvcValidationError({ code: "ValidationError", status: 0, message, reason });
}

/** Policy input as sent: USD numbers written as exact decimal strings (a NaN or negative throws). */
export function policyBody(input: PolicyInput): Record<string, unknown> {
  const body: Record<string, unknown> = { ...input };
  for (const key of ["maxPerTx", "dailyLimit", "alertAbove", "approvalAbove"] as const) {
    const value = input[key];
    if (typeof value === "number") body[key] = decimalFromNumber(value);
  }
  return body;
}

/**
 * A wallet's spending policy (api.md "Spending policy"). Changes made here drop the gate's cached per-call
 * cap for the wallet (rule 4.8.7).
 * @example
 * await wallet.policy.update({ maxPerTx: "10", dailyLimit: "50" });
 * await wallet.policy.pause();
 */
export class WalletPolicy {
  readonly #walletId: string;
  readonly #ctx: ClientContext;

  constructor(walletId: string, ctx: ClientContext) {
    this.#walletId = walletId;
    this.#ctx = ctx;
  }

  /**
   * The policy as the service holds it now.
   * @example
   * const { maxPerTx, dailyLimit, status } = await wallet.policy.get();
   */
  get(): Promise<Policy> {
    return this.#ctx.transport.request<Policy>({ method: "GET", path: this.#path(""), idempotent: true });
  }

  /**
   * Changes any subset of the fields (USD as strings or numbers; `null` removes a bound). An agent key may
   * only tighten; loosening needs an admin credential (403 `SvcForbiddenError` otherwise).
   * @example
   * await wallet.policy.update({ maxPerTx: 25, whitelist: ["0xc202…f741"] });
   */
  update(input: PolicyInput): Promise<Policy> {
    if (input === null || typeof input !== "object") throw invalid("policy.update expects an object");
    return this.#change({ method: "PATCH", path: this.#path(""), body: policyBody(input), idempotent: true });
  }

  /**
   * Stops all spending from the wallet.
   * @example
   * await wallet.policy.pause();
   */
  pause(): Promise<Policy> {
    return this.#change({ method: "POST", path: this.#path("/pause"), idempotent: true });
  }

  /**
   * Restarts spending (needs an admin credential).
   * @example
   * await wallet.policy.resume();
   */
  resume(): Promise<Policy> {
    return this.#change({ method: "POST", path: this.#path("/resume"), idempotent: true });
  }

  async #change(request: Parameters<Transport["request"]>[0]): Promise<Policy> {
    try {
      return await this.#ctx.transport.request<Policy>(request);
    } finally {
      // Also after a failure: a lost answer may hide a change that happened.
      this.#ctx.gate?.invalidateCap(this.#walletId);
    }
  }

  #path(suffix: string): string {
    return `/wallets/${encodeURIComponent(this.#walletId)}/policy${suffix}`;
  }
}

/**
 * A wallet: its record's fields (a snapshot from when it was read) and what can be done with it.
 * @example
 * const wallet = await svc.wallet.get("wal_…");
 * const tx = await wallet.send({ to: "0xc202…f741", amount: 10, token: "USDC", chain: "base" });
 * console.log(tx.txHash, tx.status);
 */
export class Wallet implements WalletRecord {
  readonly id: string;
  readonly name: string;
  readonly chains: string[];
  readonly evm?: { address: string };
  readonly solana?: { address: string };
  readonly metadata: Record<string, unknown>;
  readonly status: "active" | "archived";
  readonly createdAt: string;
  /** The wallet's spending policy. */
  readonly policy: WalletPolicy;
  readonly #ctx: ClientContext;

  constructor(record: WalletRecord, ctx: ClientContext) {
    this.id = record.id;
    this.name = record.name;
    this.chains = record.chains;
    if (record.evm) this.evm = record.evm;
    if (record.solana) this.solana = record.solana;
    this.metadata = record.metadata;
    this.status = record.status;
    this.createdAt = record.createdAt;
    this.#ctx = ctx;
    this.policy = new WalletPolicy(record.id, ctx);
  }

  /**
   * Sends tokens (spec 4.7). The amount is checked against the token's decimals before any request. The call
   * carries one `Idempotency-Key` (generated, or `options.idempotencyKey`) across its retries, so a retried
   * send never pays twice. With the gate on, the daemon authorizes first (a denial throws
   * {@link SvcSpendDeniedError} and nothing is submitted) and the broadcast is settled before this resolves.
   * A spend above the policy's `approvalAbove` is not an error: it resolves to the transaction with status
   * `pending_approval` (no `txHash` yet) and its `approval.expiresAt`; an admin decides it through
   * `svc.approvals`, and {@link Wallet.waitForTransaction} follows it.
   * @example
   * const tx = await wallet.send({ to: "0xc202…f741", amount: 10, token: "USDC", chain: "base" });
   * // tx.txHash, tx.spendDecisionId (with the gate), tx.status === "pending" (or "pending_approval")
   */
  async send(input: SendInput, options: RequestOptions = {}): Promise<Transaction> {
    if (input === null || typeof input !== "object")
      throw invalid("send expects { to, amount, token, chain }");
    const { to, amount, chain, spendDecisionId } = input;
    const token = input.token ?? "USDC";
    if (typeof to !== "string" || to === "") throw invalid("send: `to` must be a non-empty string");
    if (typeof chain !== "string" || chain === "") throw invalid("send: `chain` must be a non-empty string");
    if (typeof token !== "string" || token === "") throw invalid("send: `token` must be a non-empty string");
    if (spendDecisionId !== undefined && (typeof spendDecisionId !== "string" || spendDecisionId === "")) {
      throw invalid("send: `spendDecisionId` must be a non-empty string");
    }
    const idempotencyKey = options.idempotencyKey ?? globalThis.crypto.randomUUID();
    if (typeof idempotencyKey !== "string" || idempotencyKey.length < 1 || idempotencyKey.length > 255) {
      throw invalid("send: `idempotencyKey` must be 1 to 255 characters");
    }
    const facts = await this.#ctx.network.resolve(chain, token);
    const decimal = toDecimalAmount(amount, facts.decimals, facts.symbol);

    const submit = (decisionId: string | undefined): Promise<Transaction> =>
      this.#ctx.transport.request<Transaction>({
        method: "POST",
        path: `/wallets/${encodeURIComponent(this.id)}/send`,
        body: {
          to,
          amount: decimal,
          token,
          chain,
          ...(decisionId === undefined ? {} : { spendAuthorization: { decisionId } }),
        },
        idempotent: true,
        idempotencyKey,
        signal: options.signal,
      });

    const gate = this.#ctx.gate;
    // Rule 4.8.5: a decision obtained by the caller skips the daemon here, and its settlement is the caller's.
    if (spendDecisionId !== undefined || gate === undefined) return submit(spendDecisionId);
    return this.spendThroughGate(
      gate,
      facts,
      decimal,
      to,
      submit,
      (tx) => tx.txHash,
      (tx) => (tx.status === "pending_approval" ? tx.id : undefined),
      (tx) => tx.spendDecisionId,
    );
  }

  /**
   * Reads one of this wallet's transactions until it has left `pending_approval` and `pending` (or reached
   * one of `until`), and resolves to it. Waiting ends too at a final status (`confirmed`, `failed`,
   * `rejected`), since it cannot change any more: check `status`. Reads every `intervalMs` (default 1000)
   * and throws {@link SvcWaitTimeoutError} (with the last state read) once `timeoutMs` (default 60000) has
   * passed; the transaction itself goes on. With the gate on, a spend this client sent that was held for
   * approval is settled with the daemon here, on the first read that shows it broadcast.
   * @example
   * const held = await wallet.send({ to, amount: 250, chain: "base" }); // status "pending_approval"
   * await admin.approvals.approve(held.id);
   * const done = await wallet.waitForTransaction(held.id, { timeoutMs: 120_000 }); // done.status "confirmed"
   */
  async waitForTransaction(
    transactionId: string,
    options: WaitForTransactionOptions = {},
  ): Promise<Transaction> {
    const segment = pathSegment(transactionId);
    if (segment === undefined)
      throw invalid("waitForTransaction: `transactionId` must be a non-empty string, and not . or ..");
    if (options === null || typeof options !== "object")
      throw invalid("waitForTransaction expects an object");
    const { timeoutMs = DEFAULT_WAIT_TIMEOUT_MS, intervalMs = DEFAULT_WAIT_INTERVAL_MS, signal } = options;
    if (!Number.isSafeInteger(timeoutMs) || timeoutMs < 0)
      throw invalid("waitForTransaction: `timeoutMs` must be a whole number of milliseconds");
    if (!Number.isSafeInteger(intervalMs) || intervalMs < 0)
      throw invalid("waitForTransaction: `intervalMs` must be a whole number of milliseconds");
    const until = options.until === undefined ? undefined : [options.until].flat();
    if (
      until !== undefined &&
      (until.length === 0 || until.some((status) => !TRANSACTION_STATUSES.has(status)))
    ) {
      throw invalid(`waitForTransaction: \`until\` must be among ${[...TRANSACTION_STATUSES].join(", ")}`);
    }
    const reached = (status: TransactionStatus): boolean =>
      FINAL_STATUSES.has(status) ||
      (until === undefined ? status !== "pending" && status !== "pending_approval" : until.includes(status));
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const tx = await this.#ctx.transport.request<Transaction>({
        method: "GET",
        path: `/transactions/${segment}`,
        idempotent: true,
        signal,
      });
      if (tx.walletId !== this.id) {
        throw invalid(`waitForTransaction: ${transactionId} is not a transaction of wallet ${this.id}`);
      }
      // A gated spend that waited for approval is settled with the daemon once it is broadcast.
      await this.#ctx.gate?.settleHeld(tx);
      if (reached(tx.status)) return tx;
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new SvcWaitTimeoutError(tx, timeoutMs, until?.join(" or ") ?? "it to leave pending");
      }
      await sleep(Math.min(intervalMs, left), signal).catch((error: unknown) => {
        throw new SvcConnectionError({
          code: "ConnectionError",
          status: 0,
          message: "waitForTransaction aborted by the caller",
          reason: "aborted",
          cause: error,
        });
      });
    }
  }

  /**
   * Fetches `url`, paying an HTTP 402 (x402, v1 or v2) from this wallet within its policy (spec 4.7, 4.8.2).
   * Resolves to a standard `Response` (status, headers and body of the resource's answer) carrying
   * `receipt` (the server's settlement receipt) and `transaction` (the wallet's `x402` transaction), both
   * undefined when nothing was paid.
   *
   * Without the gate, the service makes the request and pays (`POST /v1/x402/fetch`; one `Idempotency-Key`
   * across retries, so a retried call never pays twice). With the gate, the client first probes `url`
   * through the service (asked once, unpaid: `probe: true`): any answer but 402 is returned untouched and
   * nothing is authorized. On a 402 it reads the
   * challenge, picks the first requirement the wallet can pay, authorizes exactly that network, asset,
   * amount and payee with the daemon ({@link SvcSpendDeniedError} on a denial: nothing signed), has the
   * service pay no more than that amount with the decision attached, and settles with the daemon.
   * A 402 to the payment throws {@link SvcPaymentRejectedError} naming the server's reason.
   * @example
   * const response = await wallet.fetch("https://api.example.com/weather", { maxAmount: "0.05" });
   * console.log(response.status, await response.json(), response.transaction?.status);
   */
  async fetch(url: string | URL, init: X402FetchInit = {}): Promise<PaidResponse> {
    const target = url instanceof URL ? url.href : url;
    if (typeof target !== "string" || !/^https?:\/\/\S+$/i.test(target)) {
      throw invalid("fetch: `url` must be an http:// or https:// URL");
    }
    if (init === null || typeof init !== "object") throw invalid("fetch: `init` must be an object");
    for (const key of Object.keys(init)) {
      if (!FETCH_KEYS.has(key)) {
        throw invalid(`fetch: unknown option ${JSON.stringify(key)}; known: ${[...FETCH_KEYS].join(", ")}`);
      }
    }
    const method = init.method === undefined ? undefined : String(init.method).toUpperCase();
    if (method !== undefined && !FETCH_METHODS.has(method)) {
      throw invalid(`fetch: method must be one of ${[...FETCH_METHODS].join(", ")}`);
    }
    const { chain, maxAmount, body, signal } = init;
    if (chain !== undefined && (typeof chain !== "string" || !this.chains.includes(chain))) {
      throw invalid(`fetch: \`chain\` must be one of this wallet's chains (${this.chains.join(", ")})`);
    }
    if (maxAmount !== undefined && (typeof maxAmount !== "string" || !DECIMAL_AMOUNT.test(maxAmount))) {
      throw invalid(
        'fetch: `maxAmount` must be a decimal amount of the token, e.g. "0.05"',
        "invalid_amount",
      );
    }
    if (body !== undefined && (body === null || (typeof body !== "string" && typeof body !== "object"))) {
      throw invalid("fetch: `body` must be a string or a JSON object or array");
    }
    const headers: Record<string, string> = {};
    new Headers(init.headers).forEach((value, name) => {
      headers[name] = value;
    });
    const idempotencyKey = init.idempotencyKey ?? globalThis.crypto.randomUUID();
    if (typeof idempotencyKey !== "string" || idempotencyKey.length < 1 || idempotencyKey.length > 255) {
      throw invalid("fetch: `idempotencyKey` must be 1 to 255 characters");
    }
    const request = {
      walletId: this.id,
      url: target,
      ...(method === undefined ? {} : { method }),
      ...(Object.keys(headers).length === 0 ? {} : { headers }),
      ...(body === undefined ? {} : { body }),
    };
    const payThroughService = (terms: Record<string, unknown>): Promise<PaidFetchResult> =>
      this.#ctx.transport.request<PaidFetchResult>({
        method: "POST",
        path: "/x402/fetch",
        body: { ...request, ...terms },
        idempotent: true,
        idempotencyKey,
        signal,
      });
    const answer = (result: PaidFetchResult): PaidResponse => {
      if (result.transactionId !== undefined && result.status === 402) {
        throw new SvcPaymentRejectedError(rejectionReason(result), result.transaction, target);
      }
      return responseFromPaidFetch(result);
    };

    const gate = this.#ctx.gate;
    if (gate === undefined) {
      return answer(
        await payThroughService({
          ...(chain === undefined ? {} : { chain }),
          ...(maxAmount === undefined ? {} : { maxAmount }),
        }),
      );
    }

    // Rule 4.8.2: probe; only a 402 is authorized and paid. The service asks the resource for the probe,
    // unpaid, as it asks for every request it pays: held to the same destinations (never a private
    // address or the service's own backends), redirects, sizes and time limits.
    const probe = responseFromPaidFetch(
      await this.#ctx.transport.request<PaidFetchResult>({
        method: "POST",
        path: "/x402/fetch",
        body: { ...request, probe: true },
        idempotent: false,
        signal,
      }),
    );
    if (probe.status !== 402) return probe;

    const challenge = parseX402Challenge(probe.headers, await probe.text());
    const served = await this.#ctx.network.list();
    const chains = served.filter(
      (candidate) =>
        this.chains.includes(candidate.name) && (chain === undefined || candidate.name === chain),
    );
    const chosen = chooseRequirement(
      challenge,
      chains,
      maxAmount === undefined ? undefined : (token) => atomicFloor(maxAmount, token.decimals),
      served,
    );
    if (chosen === undefined) {
      throw new SvcValidationError({
        code: "ValidationError",
        status: 0,
        message: `${target} asks for a payment this wallet cannot make within its chains${maxAmount === undefined ? "" : ` and maxAmount ${maxAmount}`}; nothing was authorized`,
        reason: "no_payable_requirement",
        details: {
          offered: challenge.requirements.map((r) => ({ ...r, amount: r.amount.toString() })),
          walletChains: this.chains,
        },
      });
    }
    const { requirement, token } = chosen;
    const facts: TokenFacts = {
      chain: chosen.chain.name,
      network: chosen.chain.network,
      symbol: token.symbol,
      asset: requirement.asset,
      decimals: token.decimals,
      usdPrice: token.usdPrice,
      native: false,
    };
    const decimal = formatAtomic(requirement.amount, token.decimals);
    let decisionId: string | undefined;
    const result = await this.spendThroughGate(
      gate,
      facts,
      decimal,
      requirement.payTo,
      (id) => {
        decisionId = id;
        // The service pays no more than what was authorized, and checks the decision against what it pays.
        return payThroughService({
          chain: chosen.chain.name,
          maxAmount: decimal,
          spendAuthorization: { decisionId: id },
        });
      },
      (paid) =>
        paid.transaction?.status === "failed"
          ? undefined
          : (paid.transaction?.txHash ?? paid.paymentReceipt?.txHash),
      undefined,
      (paid) => paid.spendDecisionId,
    );
    // The resource asked the service for nothing this time: the approval was not used.
    if (result.transactionId === undefined && decisionId !== undefined) await gate.cancel(decisionId);
    return answer(result);
  }

  /**
   * Runs one spend through the gate: builds its facts (rule 4.8.7's cap, credits) and hands it to
   * {@link SpendGate.run}. Sends and x402 payments (`fetch`, with the challenge's network, asset, amount
   * and payee) both pass here.
   */
  protected async spendThroughGate<T>(
    gate: SpendGate,
    facts: TokenFacts,
    decimal: string,
    destination: string,
    submit: (decisionId: string) => Promise<T>,
    txHashOf: (result: T) => string | undefined,
    heldIdOf?: (result: T) => string | undefined,
    decisionOf?: (result: T) => string | undefined,
  ): Promise<T> {
    const atomic = toAtomic(decimal, facts.decimals);
    const credits = creditsFor(atomic, facts.decimals, facts.usdPrice);
    if (credits === undefined) {
      throw new SvcAuthzError(
        `Cannot price ${facts.symbol} on ${facts.chain} in credits: the service states no USD price for it`,
        { reason: "misconfigured" },
      );
    }
    const perCallCap = await gate.capFor(
      this.id,
      async () => (await this.policy.get()).maxPerTx,
      (usd) => usdToAtomicCap(usd, facts.decimals, facts.usdPrice),
    );
    const spend: GatedSpend = {
      context: {
        provider: gate.provider,
        network: facts.network,
        asset: facts.asset,
        amount: atomic.toString(),
        credits,
      },
      destination,
      perCallCap,
    };
    return gate.run(spend, submit, txHashOf, heldIdOf, decisionOf);
  }

  /**
   * A page of the wallet's history, newest first; also iterable over every transaction of every page.
   * @example
   * const { data, total } = await wallet.transactions({ limit: 50, type: "send" });
   * for await (const tx of wallet.transactions()) console.log(tx.type, tx.amount, tx.token);
   */
  transactions(query: TransactionQuery = {}): TransactionList {
    const fetchPage = (offset: number | undefined): Promise<TransactionPage> =>
      this.#ctx.transport.request<TransactionPage>({
        method: "GET",
        path: `/wallets/${encodeURIComponent(this.id)}/transactions`,
        query: { limit: query.limit, offset, chain: query.chain, type: query.type },
        idempotent: true,
      });
    const first = fetchPage(query.offset);
    async function* pages(): AsyncGenerator<TransactionPage> {
      let page = await first;
      for (;;) {
        yield page;
        const next = page.offset + page.data.length;
        if (page.data.length === 0 || next >= page.total) return;
        page = await fetchPage(next);
      }
    }
    async function* items(): AsyncGenerator<Transaction> {
      for await (const page of pages()) yield* page.data;
    }
    return Object.assign(first, { pages, [Symbol.asyncIterator]: items });
  }

  /**
   * Balances on each of the wallet's chains, read from the chains, with USD values.
   * @example
   * const { balances, totalUsdValue } = await wallet.balance();
   */
  balance(): Promise<Balance> {
    return this.#ctx.transport.request<Balance>({
      method: "GET",
      path: `/wallets/${encodeURIComponent(this.id)}/balance`,
      idempotent: true,
    });
  }

  /**
   * Spending in the rolling 24 h against the daily limit, in total and by hour, as the service counts it.
   * @example
   * const { used, remaining } = await wallet.spending(); // "12.50", "37.50"
   */
  spending(): Promise<WalletSpending> {
    return this.#ctx.transport.request<WalletSpending>({
      method: "GET",
      path: `/wallets/${encodeURIComponent(this.id)}/spending`,
      idempotent: true,
    });
  }

  /**
   * Test coins from the service's faucet (local and test networks only); resolves once they are confirmed,
   * with the wallet's `receive` transaction.
   * @example
   * await wallet.faucet({ chain: "base", token: "USDC", amount: 250 });
   */
  async faucet(input: FaucetInput): Promise<Transaction> {
    if (input === null || typeof input !== "object")
      throw invalid("faucet expects { chain, token, amount? }");
    let amount: string | undefined;
    if (input.amount !== undefined) {
      const facts = await this.#ctx.network.resolve(input.chain, input.token);
      amount = toDecimalAmount(input.amount, facts.decimals, facts.symbol);
    }
    return this.#ctx.transport.request<Transaction>({
      method: "POST",
      path: `/wallets/${encodeURIComponent(this.id)}/faucet`,
      body: { chain: input.chain, token: input.token, ...(amount === undefined ? {} : { amount }) },
      // Pays on chain and has no idempotency key: repeated only when the service surely did not act.
      idempotent: false,
    });
  }

  /**
   * Archives the wallet (spec 3): its history stays, no further sends.
   * @example
   * await wallet.archive();
   */
  async archive(): Promise<void> {
    await this.#ctx.transport.request<undefined>({
      method: "DELETE",
      path: `/wallets/${encodeURIComponent(this.id)}`,
      idempotent: true,
    });
  }

  /**
   * Restores an archived wallet: it spends again, under its policy. An admin credential's (an agent key may
   * archive its wallet, never bring it back); restoring an active wallet changes nothing.
   * @example
   * await wallet.restore();
   */
  async restore(): Promise<void> {
    await this.#ctx.transport.request<WalletRecord>({
      method: "POST",
      path: `/wallets/${encodeURIComponent(this.id)}/restore`,
      idempotent: true,
    });
  }

  /**
   * The record's fields, without the methods.
   * @example
   * JSON.stringify(wallet); // {"id":"wal_…","name":"…",…}
   */
  toJSON(): WalletRecord {
    return {
      id: this.id,
      name: this.name,
      chains: this.chains,
      ...(this.evm ? { evm: this.evm } : {}),
      ...(this.solana ? { solana: this.solana } : {}),
      metadata: this.metadata,
      status: this.status,
      createdAt: this.createdAt,
    };
  }
}
