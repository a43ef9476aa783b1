/**
 * HTTP to the service: JSON in and out, bearer credential, per-attempt timeouts through `AbortSignal`, and
 * retries with exponential backoff and jitter. Uses only `fetch` and web globals, so it runs in browsers too.
 */
import { errorFromResponse, SvcConnectionError, type SvcError, SvcRateLimitError } from "./errors.ts";

/**
 * The `fetch` the SDK calls: the global one by default, or the caller's (for a proxy agent, tracing, tests).
 * @example
 * const traced: FetchLike = (url, init) => { console.log(init.method, url); return fetch(url, init); };
 * const svc = new SvcWallet({ apiKey, fetch: traced });
 */
export type FetchLike = (input: string, init: RequestInit) => Promise<Response>;

/** How the transport is set up (from the `SvcWallet` options). */
export interface TransportOptions {
  baseUrl: string;
  apiKey: string | undefined;
  fetch: FetchLike;
  maxRetries: number;
  /** Whether a 429 is retried after its `Retry-After`; false leaves it to the caller at once. */
  retryRateLimited: boolean;
  timeoutMs: number;
}

/** One request. */
export interface TransportRequest {
  method: "GET" | "POST" | "PATCH" | "DELETE";
  /** Path below the base URL, starting with `/`. */
  path: string;
  query?: Record<string, string | number | undefined>;
  body?: unknown;
  /**
   * Safe to repeat after an answer that may have been lost (a dropped connection, a timeout, a 5xx): reads,
   * deletes, and requests that carry an `Idempotency-Key`. Other requests are retried only when the service
   * surely did not act (429, connection refused).
   */
  idempotent: boolean;
  idempotencyKey?: string;
  signal?: AbortSignal | undefined;
  /** Send no credential (register, login). */
  anonymous?: boolean;
}

/** Longest `Retry-After` the client waits for by itself; beyond it the 429 is the caller's to handle. */
const MAX_RETRY_AFTER_S = 60;
const BASE_DELAY_MS = 250;
const MAX_DELAY_MS = 8_000;

/**
 * Delay before retry number `attempt` (0-based): exponential from 250 ms, capped at 8 s, with "equal
 * jitter" (half fixed, half random) so clients that failed together do not retry together.
 */
export function backoffDelayMs(attempt: number, random: () => number = Math.random): number {
  const ceiling = Math.min(MAX_DELAY_MS, BASE_DELAY_MS * 2 ** attempt);
  return ceiling / 2 + random() * (ceiling / 2);
}

/**
 * `id` as one segment of a request's path, or undefined when it cannot be one: not a string, empty, or `.`
 * or `..`, which the URL resolves away (`/v1/wallets/..` is `/v1/`, another route).
 * @example pathSegment("wal_123") // "wal_123"
 */
export function pathSegment(id: unknown): string | undefined {
  if (typeof id !== "string" || id === "" || id === "." || id === "..") return undefined;
  return encodeURIComponent(id);
}

/**
 * Whether `value` is an http:// or https:// URL the SDK may call: one with no user name or password in it.
 * `fetch` refuses such a URL with an error that repeats it whole, password included.
 * @example isServiceUrl("http://127.0.0.1:8080/v1") // true; isServiceUrl("http://ada:pw@host/v1") // false
 */
export function isServiceUrl(value: unknown): value is string {
  if (typeof value !== "string" || !/^https?:\/\/\S+$/.test(value)) return false;
  try {
    const url = new URL(value);
    return url.username === "" && url.password === "";
  } catch {
    return false;
  }
}

/**
 * Whether an answer fetched with `redirect: "manual"` is a redirect: a 3xx in Node, an opaque one (status 0)
 * in a browser. The SDK follows none: a redirect would carry the request's body wherever it points.
 */
export function isRedirect(response: Response): boolean {
  return response.type === "opaqueredirect" || (response.status >= 300 && response.status < 400);
}

/**
 * Lets go of an answer whose body will not be read (a redirect the SDK does not follow): left unread, it
 * would hold its connection until the answer was garbage-collected, however long its body ran.
 */
export function discardBody(response: Response): void {
  response.body?.cancel().catch(() => {});
}

/** Waits `ms`, or rejects with the signal's reason when it aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** True when `fetch` failed because nothing listened (the request surely never reached the service). */
function connectionRefused(error: unknown): boolean {
  const cause = (error as { cause?: { code?: unknown } } | undefined)?.cause;
  return cause?.code === "ECONNREFUSED";
}

function describe(error: unknown): string {
  const cause = (error as { cause?: { message?: unknown; code?: unknown } } | undefined)?.cause;
  const base = error instanceof Error ? error.message : String(error);
  if (cause && typeof cause.message === "string") return `${base} (${cause.message})`;
  return base;
}

/** Performs requests against the service. One per `SvcWallet`. */
export class Transport {
  constructor(readonly options: TransportOptions) {}

  /** Sends the request (retrying as described on {@link TransportRequest}) and returns the parsed body. */
  async request<T>(request: TransportRequest): Promise<T> {
    const { maxRetries } = this.options;
    const url = this.#url(request);
    const headers: Record<string, string> = { accept: "application/json" };
    if (!request.anonymous && this.options.apiKey !== undefined) {
      headers.authorization = `Bearer ${this.options.apiKey}`;
    }
    if (request.body !== undefined) headers["content-type"] = "application/json";
    if (request.idempotencyKey !== undefined) headers["idempotency-key"] = request.idempotencyKey;
    const body = request.body === undefined ? undefined : JSON.stringify(request.body);
    const retryable = request.idempotent || request.idempotencyKey !== undefined;

    for (let attempt = 0; ; attempt++) {
      const canRetry = attempt < maxRetries;
      const timeout = AbortSignal.timeout(this.options.timeoutMs);
      const signal = request.signal ? AbortSignal.any([request.signal, timeout]) : timeout;
      let response: Response;
      try {
        response = await this.options.fetch(url, {
          method: request.method,
          headers,
          signal,
          // The API never redirects: a redirect is a gateway's, and following it would send the body (a
          // password, a spend) to wherever it points.
          redirect: "manual",
          ...(body === undefined ? {} : { body }),
        });
      } catch (error) {
        if (request.signal?.aborted) throw this.#aborted(request.signal, error);
        const timedOut = timeout.aborted;
        if (canRetry && (retryable || (!timedOut && connectionRefused(error)))) {
          await this.#wait(backoffDelayMs(attempt), request.signal);
          continue;
        }
        throw new SvcConnectionError({
          code: "ConnectionError",
          status: 0,
          message: timedOut
            ? `No answer from ${request.method} ${request.path} within ${this.options.timeoutMs} ms`
            : `Could not reach the service for ${request.method} ${request.path}: ${describe(error)}`,
          reason: timedOut ? "timeout" : "network_error",
          cause: error,
        });
      }

      if (isRedirect(response)) {
        discardBody(response);
        throw new SvcConnectionError({
          code: "ConnectionError",
          status: response.status,
          message: `The answer to ${request.method} ${request.path} is a redirect (HTTP ${response.status}), which the SDK does not follow: is the base URL the service's own?`,
          reason: "redirect",
          requestId: response.headers.get("x-request-id") ?? undefined,
        });
      }
      let parsed: unknown;
      try {
        const text = await response.text();
        parsed = text === "" ? undefined : JSON.parse(text);
      } catch (error) {
        if (request.signal?.aborted) throw this.#aborted(request.signal, error);
        // The body was cut or is not JSON: as good as no answer when it was a success we cannot read.
        if (canRetry && retryable) {
          await this.#wait(backoffDelayMs(attempt), request.signal);
          continue;
        }
        throw new SvcConnectionError({
          code: "ConnectionError",
          status: response.status,
          message: `Unreadable answer (HTTP ${response.status}) to ${request.method} ${request.path}: ${describe(error)}`,
          reason: "malformed_response",
          requestId: response.headers.get("x-request-id") ?? undefined,
          cause: error,
        });
      }
      if (response.ok) return parsed as T;

      const error = errorFromResponse(response.status, parsed, response.headers);
      if (canRetry) {
        const delay = this.#retryDelay(error, attempt, retryable, request.idempotencyKey !== undefined);
        if (delay !== undefined) {
          await this.#wait(delay, request.signal);
          continue;
        }
      }
      throw error;
    }
  }

  /** How long to wait before retrying after an error answer; undefined = do not retry. */
  #retryDelay(error: SvcError, attempt: number, retryable: boolean, keyed: boolean): number | undefined {
    if (error instanceof SvcRateLimitError) {
      if (!this.options.retryRateLimited || error.retryAfter > MAX_RETRY_AFTER_S) return undefined;
      return error.retryAfter > 0 ? error.retryAfter * 1000 : backoffDelayMs(attempt);
    }
    if (error.status >= 500 && retryable) return backoffDelayMs(attempt);
    // The first request with this key is still running on the service (our own earlier attempt).
    if (keyed && error.reason === "idempotency_key_in_use") return backoffDelayMs(attempt);
    return undefined;
  }

  async #wait(ms: number, signal: AbortSignal | undefined): Promise<void> {
    try {
      await sleep(ms, signal);
    } catch (error) {
      throw this.#aborted(signal as AbortSignal, error);
    }
  }

  #aborted(signal: AbortSignal, cause: unknown): SvcConnectionError {
    return new SvcConnectionError({
      code: "ConnectionError",
      status: 0,
      message: `Aborted by the caller: ${describe(signal.reason ?? cause)}`,
      reason: "aborted",
      cause: signal.reason ?? cause,
    });
  }

  #url(request: TransportRequest): string {
    let url = this.options.baseUrl + request.path;
    if (request.query) {
      const params = new URLSearchParams();
      for (const [key, value] of Object.entries(request.query)) {
        if (value !== undefined) params.set(key, String(value));
      }
      const text = params.toString();
      if (text !== "") url += `?${text}`;
    }
    return url;
  }
}
