import { creditsFor, decimalFromNumber, toAtomic, toDecimalAmount, usdToAtomicCap } from "./amounts.ts";
import type { GatedSpend, SpendGate } from "./authz/gate.ts";
import { SvcAuthzError, SvcValidationError } from "./errors.ts";
import type { NetworkDirectory, TokenFacts } from "./network.ts";
import type { Transport } from "./transport.ts";
import type {
  Balance,
  FaucetInput,
  Policy,
  PolicyInput,
  RequestOptions,
  SendInput,
  Transaction,
  TransactionPage,
  TransactionQuery,
  WalletRecord,
} from "./types.ts";

/** What wallet objects share with their `SvcWallet`. */
export interface ClientContext {
  transport: Transport;
  network: NetworkDirectory;
  gate: SpendGate | undefined;
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
   * @example
   * const tx = await wallet.send({ to: "0xc202…f741", amount: 10, token: "USDC", chain: "base" });
   * // tx.txHash, tx.spendDecisionId (with the gate), tx.status === "pending"
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
    return this.spendThroughGate(gate, facts, decimal, to, submit);
  }

  /**
   * Runs one spend through the gate: builds its facts (rule 4.8.7's cap, credits) and hands it to
   * {@link SpendGate.run}. This is the seam the x402 payer (`wallet.fetch`, spec 4.8.2; its own issue) plugs
   * into with the challenge's network, asset, amount and payee.
   */
  protected async spendThroughGate<T extends { txHash?: string }>(
    gate: SpendGate,
    facts: TokenFacts,
    decimal: string,
    destination: string,
    submit: (decisionId: string) => Promise<T>,
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
    return gate.run(spend, submit, (result) => result.txHash);
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
