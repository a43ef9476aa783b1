/**
 * What can go wrong talking to a chain, as classes. The chain clients' RPC transports raise them (see
 * `EvmChain` and `SolanaChain`), mapping viem's typed errors and `@solana/kit`'s error codes; callers branch
 * with `instanceof`, never on message text. Each has a short message, typed `facts` and the library's
 * error as its `cause` (viem's `BaseError` style).
 *
 * ```
 * ChainError
 * ├─ ChainUnavailableError      no usable answer: the caller may try again later
 * │  ├─ ChainUnreachableError   connection refused or reset, socket closed, HTTP error status
 * │  ├─ ChainTimeoutError       no answer within the time limit
 * │  └─ UnclearSendError        a send answered with the endpoint's own trouble (an internal error, a limit)
 * ├─ ChainRequestError          the node answered a read with an error (or with something unusable)
 * ├─ TransactionRejectedError   the node refused a transaction: it can never land as sent
 * ├─ NonceTakenError            EVM: another transaction (perhaps this very one) holds its nonce
 * ├─ BlockhashNotFoundError     Solana: the node does not know the transaction's blockhash (yet)
 * ├─ TransactionKnownError      Solana: the node has already processed this very transaction
 * └─ TransactionNotFoundError   no transaction with that hash
 * ```
 */
import { errors } from "../internal/errors.ts";

/** What every chain error tells: the chain (its API name) and, for a call, the RPC method. */
export type ChainErrorDetails = { chain: string; method?: string };

/** The base of every error the chain layer raises. */
export abstract class ChainError<Details extends ChainErrorDetails = ChainErrorDetails> extends Error {
  /** The message without the facts. */
  readonly shortMessage: string;
  /**
   * The facts, typed. Not named `details`: viem reads a `details` string off any error it meets (a transport's
   * included), and an object there broke its error handling of the call (a 500 instead of a 502).
   */
  readonly facts: Details;

  constructor(shortMessage: string, details: Details, cause?: unknown) {
    const facts = Object.entries(details)
      .filter(([, value]) => value !== undefined)
      .map(([key, value]) => `${key}: ${String(value)}`);
    super(`${shortMessage}\n\n${facts.join("\n")}`, cause === undefined ? undefined : { cause });
    this.shortMessage = shortMessage;
    this.facts = details;
  }
}

/** A call that got no usable answer. */
export type ChainCallDetails = ChainErrorDetails & { method: string };

/** No usable answer from the endpoint (not a refusal by the chain): the same call may work later. */
export abstract class ChainUnavailableError<
  Details extends ChainCallDetails = ChainCallDetails,
> extends ChainError<Details> {}

/** What {@link ChainUnreachableError} knows: the HTTP error status, or that the answer was no JSON-RPC response. */
export type UnreachableDetails = ChainCallDetails & { status?: number; notJsonRpc?: true };

/**
 * Connection refused or reset, socket closed, an HTTP error status, or an answer that is no JSON-RPC response
 * (a proxy's page): no JSON-RPC answer.
 */
export class ChainUnreachableError extends ChainUnavailableError<UnreachableDetails> {
  override name = "ChainUnreachableError";
  constructor(details: UnreachableDetails, cause?: unknown) {
    super(
      details.status !== undefined
        ? `The ${details.chain} RPC endpoint answered HTTP ${details.status}`
        : details.notJsonRpc
          ? `The ${details.chain} RPC endpoint answered with something that is not a JSON-RPC response`
          : `The ${details.chain} RPC endpoint could not be reached`,
      details,
      cause,
    );
  }

  /**
   * Worth retrying at once: the connection failed before any answer (refused, reset, closed under the
   * request, as when a server closes an idle keep-alive socket the client reuses), the answer was no JSON-RPC
   * response (a proxy's page), or a gateway said its upstream is busy or down.
   */
  get transient(): boolean {
    const status = this.facts.status;
    return status === undefined || status === 429 || status === 502 || status === 503 || status === 504;
  }
}

/** The endpoint did not answer within the time limit. */
export class ChainTimeoutError extends ChainUnavailableError<ChainCallDetails & { timeoutMs: number }> {
  override name = "ChainTimeoutError";
  constructor(details: ChainCallDetails & { timeoutMs: number }, cause?: unknown) {
    super(`The ${details.chain} RPC endpoint did not answer within ${details.timeoutMs} ms`, details, cause);
  }
}

/**
 * A transaction's send answered with an error of the endpoint's own trouble, by its JSON-RPC code (an
 * internal error, a limit exceeded, a node unhealthy: a gateway's timeout comes so), not a verdict on the
 * transaction: a gateway or load balancer may answer so and still pass the transaction on, so it may land.
 * Like no answer at all, it proves nothing; the chain's own record decides. Any other error answer to a send
 * is {@link TransactionRejectedError}.
 */
export class UnclearSendError extends ChainUnavailableError<
  ChainCallDetails & { rpcCode?: number; reason: string }
> {
  override name = "UnclearSendError";
  constructor(details: ChainCallDetails & { rpcCode?: number; reason: string }, cause?: unknown) {
    super(
      `The ${details.chain} RPC endpoint answered the send with an error: ${details.reason}`,
      details,
      cause,
    );
  }
}

/** The node answered a read with an error, or with something this layer cannot use. */
export class ChainRequestError extends ChainError<ChainCallDetails & { rpcCode?: number }> {
  override name = "ChainRequestError";
  constructor(details: ChainCallDetails & { rpcCode?: number }, cause?: unknown) {
    super(`The ${details.chain} node refused ${details.method}`, details, cause);
  }
}

/** The node refused a transaction for good; `reason` is the node's own word for why. */
export class TransactionRejectedError extends ChainError<ChainCallDetails & { reason: string }> {
  override name = "TransactionRejectedError";
  constructor(details: ChainCallDetails & { reason: string }, cause?: unknown) {
    super(`The ${details.chain} node rejected the transaction: ${details.reason}`, details, cause);
  }
}

/**
 * EVM: the transaction's nonce is already used, or held by another pending transaction. Not proof that it
 * can never land: the transaction holding the nonce may be this very one, or may be dropped.
 */
export class NonceTakenError extends ChainError<ChainCallDetails & { nonce?: number }> {
  override name = "NonceTakenError";
  constructor(details: ChainCallDetails & { nonce?: number }, cause?: unknown) {
    super(
      `The ${details.chain} node refused the transaction: its nonce${details.nonce === undefined ? "" : ` ${details.nonce}`} is taken`,
      details,
      cause,
    );
  }
}

/**
 * Solana: the node does not know the transaction's blockhash. Not proof that it can never land: a node
 * behind the one that gave the blockhash does not know it yet.
 */
export class BlockhashNotFoundError extends ChainError<ChainCallDetails> {
  override name = "BlockhashNotFoundError";
  constructor(details: ChainCallDetails, cause?: unknown) {
    super(`The ${details.chain} node does not know the transaction's blockhash`, details, cause);
  }
}

/** Solana: the node has already processed this very transaction (sending it again changes nothing). */
export class TransactionKnownError extends ChainError<ChainCallDetails> {
  override name = "TransactionKnownError";
  constructor(details: ChainCallDetails, cause?: unknown) {
    super(`The ${details.chain} node has already processed this transaction`, details, cause);
  }
}

/** No transaction with this hash (or signature) on the chain or in the node's pool. */
export class TransactionNotFoundError extends ChainError<ChainErrorDetails & { txHash: string }> {
  override name = "TransactionNotFoundError";
  constructor(details: ChainErrorDetails & { txHash: string }, cause?: unknown) {
    super(`Transaction ${details.txHash} not found on ${details.chain}`, details, cause);
  }
}

/**
 * The chain error in `error`'s cause chain, if any: a library may wrap what a transport raised (viem's
 * `readContract` wraps it in a `ContractFunctionExecutionError`).
 * @example findChainError(new Error("wrapper", { cause: new ChainTimeoutError({ chain: "base", method: "eth_call", timeoutMs: 1 }) }))
 */
export function findChainError(error: unknown): ChainError | undefined {
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 10; depth++) {
    if (e instanceof ChainError) return e;
    e = e.cause;
  }
  return undefined;
}

/** Delays before each retry of an idempotent read: three retries, then the error stands. */
const READ_RETRY_DELAYS_MS = [100, 300, 900] as const;

/**
 * Runs one RPC call, retrying it after a transient transport failure ({@link ChainUnreachableError}
 * `transient`) when it is an idempotent read. A send is never retried here: whether it reached the node is
 * unknown, and the caller decides from the chain's own record.
 * @example await withReadRetries(method !== "eth_sendRawTransaction", () => transport.request(args));
 */
export async function withReadRetries<T>(idempotent: boolean, call: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await call();
    } catch (error) {
      const delay = READ_RETRY_DELAYS_MS[attempt];
      if (!idempotent || delay === undefined || !(error instanceof ChainUnreachableError) || !error.transient)
        throw error;
      // Jitter spreads the retries of many callers that failed together (a node restarting).
      await new Promise((resolve) => setTimeout(resolve, delay + Math.floor(Math.random() * delay)));
    }
  }
}

/**
 * Runs a chain call for domain code: an endpoint giving no usable answer becomes 502 `chain_unavailable`, a
 * read the node refuses 502 `chain_read_refused` (a node behind, or a token configured where no contract is;
 * the cause is logged, never shown); other failures pass through.
 * @example const balance = await chainCall("base", () => client.getBalance(address, token));
 */
export async function chainCall<T>(chain: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    if (error instanceof ChainUnavailableError) throw errors.chainUnavailable(chain, error);
    if (error instanceof ChainRequestError) throw errors.chainReadRefused(chain, error.facts.method, error);
    throw error;
  }
}

/**
 * Removes an RPC URL's path and query (where providers put their API keys) from an error and its causes,
 * so a failed chain call can be logged or wrapped without the key. Returns the same error.
 * @example throw scrubRpcUrl(error, "https://base-mainnet.example/v2/KEY") // "…https://base-mainnet.example/…"
 */
export function scrubRpcUrl<T>(error: T, rpcUrl: string): T {
  let origin: string;
  const written = [rpcUrl];
  try {
    const parsed = new URL(rpcUrl);
    const keyInPath = (parsed.pathname !== "/" && parsed.pathname !== "") || parsed.search !== "";
    if (!keyInPath && !parsed.username) return error;
    origin = `${parsed.protocol}//${parsed.host}/…`;
    // As a client writes it once it has moved the credentials to the Authorization header (viem does).
    if (keyInPath) written.push(`${parsed.protocol}//${parsed.host}${parsed.pathname}${parsed.search}`);
  } catch {
    return error;
  }
  // Longest first: a shorter form inside a longer one must not leave the longer's rest behind.
  const secretForms = written
    .flatMap((form) => [form, form.replace(/\/$/, "")])
    .sort((a, b) => b.length - a.length);
  const scrub = (text: string) => secretForms.reduce((out, form) => out.split(form).join(origin), text);
  for (let e: unknown = error, depth = 0; e && typeof e === "object" && depth < 8; depth++) {
    const record = e as Record<string, unknown>;
    for (const key of ["message", "shortMessage", "details", "url", "stack"]) {
      const value = record[key];
      if (typeof value === "string" && secretForms.some((form) => value.includes(form))) {
        try {
          record[key] = scrub(value);
        } catch {}
      }
    }
    if (Array.isArray(record.metaMessages)) {
      record.metaMessages = record.metaMessages.map((m) => (typeof m === "string" ? scrub(m) : m));
    }
    e = record.cause;
  }
  return error;
}
