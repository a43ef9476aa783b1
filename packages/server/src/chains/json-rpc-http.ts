/**
 * JSON-RPC over HTTP(S) for the EVM chain client, on node's `http`/`https` with kept-alive connections.
 * One call per request, except where one caller asks for several reads it needs together
 * ({@link JsonRpcEndpoint.callBatch}): never a batch of several callers' calls, so one caller's slow call
 * never holds up another's.
 *
 * It fails with viem's transport errors (`HttpRequestError`, `TimeoutError`, `RpcRequestError`), so the
 * chain layer maps its failures to chain errors in one place (`chainTransport` in evm.ts); every error
 * carries the URL as configured, which the chain layer scrubs. Unlike `fetch` it follows no redirect: an
 * endpoint that moved answers 3xx, a ChainUnreachableError naming the status. It exists because viem's
 * transport goes through `fetch`, which costs about three times the CPU of a request made with
 * `http.request` (measured on loopback: 0.83 against 0.28 ms a call), and a send makes several calls.
 */
import http from "node:http";
import https from "node:https";
import { createBrotliDecompress, createGunzip, createInflate } from "node:zlib";
import { createTransport, HttpRequestError, RpcRequestError, TimeoutError, type Transport } from "viem";
import { mapLimited } from "../internal/concurrency.ts";

/** Options of {@link jsonRpcHttp}. */
export interface JsonRpcHttpOptions {
  /** How long one call may take, in ms. */
  timeoutMs: number;
  /** A larger answer is refused; default 10 MiB, as viem's. */
  maxResponseBytes?: number;
}

/** An answer that came (HTTP 2xx) but is no JSON-RPC response to the request: a gateway's page, `{}`, a batch cut short. */
export class NotJsonRpcAnswerError extends HttpRequestError {}

interface RpcBody {
  [key: string]: unknown;
  jsonrpc: "2.0";
  id: number;
  method: string;
  params?: unknown;
}

interface RpcAnswer {
  result?: unknown;
  error?: { code: number; message: string; data?: unknown };
}

/**
 * Idle connections are closed after this long, before servers close them (undici's default too): a server
 * closing an idle connection just as it is reused costs the request (reads are retried, sends are not).
 */
const IDLE_SOCKET_MS = 4_000;
const DEFAULT_MAX_RESPONSE_BYTES = 10 * 1024 * 1024;
/** Calls in flight at once when an endpoint that refuses batches is asked a batch's calls one by one. */
const ONE_BY_ONE_IN_FLIGHT = 4;

/**
 * A viem transport for `url` (or an endpoint already open). viem's own retries are off: the chain layer
 * retries only what is safe to.
 * @example createPublicClient({ transport: jsonRpcHttp("http://127.0.0.1:8545", { timeoutMs: 15_000 }) })
 */
export function jsonRpcHttp(url: string, options: JsonRpcHttpOptions): Transport;
export function jsonRpcHttp(endpoint: JsonRpcEndpoint): Transport;
export function jsonRpcHttp(target: string | JsonRpcEndpoint, options?: JsonRpcHttpOptions): Transport {
  const endpoint =
    typeof target === "string" ? new JsonRpcEndpoint(target, options as JsonRpcHttpOptions) : target;
  return () =>
    createTransport({
      key: "json-rpc-http",
      name: "JSON-RPC over HTTP",
      type: "http",
      retryCount: 0,
      timeout: endpoint.timeoutMs,
      request: ({ method, params }) => endpoint.call(method, params) as never,
    });
}

/** One call of a batch: a method and its parameters. */
export interface RpcCall {
  method: string;
  params?: unknown;
}

/** The node's answer to one call of a batch: its result, or viem's `RpcRequestError` for its error. */
export type RpcOutcome = { result: unknown } | { error: RpcRequestError };

/** One endpoint: its kept-alive connections and its request ids. */
export class JsonRpcEndpoint {
  readonly #url: URL;
  /** The URL as configured: what errors carry, so that the chain layer's scrubbing finds it. */
  readonly url: string;
  readonly timeoutMs: number;
  readonly #maxResponseBytes: number;
  readonly #agent: http.Agent;
  readonly #request: typeof http.request;
  readonly #headers: Record<string, string> = {
    "content-type": "application/json",
    accept: "application/json",
    // Large answers (blocks with their transactions, logs) come compressed from providers that can.
    "accept-encoding": "gzip, deflate, br",
  };
  #nextId = 1;
  /** Set once the endpoint has refused a batch: later batches go call by call. */
  #refusesBatches = false;

  constructor(url: string, options: JsonRpcHttpOptions) {
    this.#url = new URL(url);
    this.url = url;
    this.timeoutMs = options.timeoutMs;
    this.#maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
    const secure = this.#url.protocol === "https:";
    this.#agent = new (secure ? https.Agent : http.Agent)({ keepAlive: true, timeout: IDLE_SOCKET_MS });
    this.#request = secure ? https.request : http.request;
    // Credentials in the URL (https://user:pass@host/) go as Basic auth, as fetch sends them.
    if (this.#url.username || this.#url.password) {
      const credentials = `${decodeURIComponent(this.#url.username)}:${decodeURIComponent(this.#url.password)}`;
      this.#headers.authorization = `Basic ${Buffer.from(credentials).toString("base64")}`;
    }
  }

  async call(method: string, params: unknown): Promise<unknown> {
    const body = this.#body({ method, params });
    const { status, text } = await this.#post(body);
    const answer = parseJson(text);
    // A server error is the gateway's, whatever its body: a JSON-RPC error in a 5xx (a gateway whose node
    // did not answer in time) says nothing of what the node did with the call. Any other JSON-RPC error,
    // whatever its shape, is the node's answer.
    if (status >= 500) this.#checkStatus(body, status, text);
    if (isRpcAnswer(answer) && answer.error != null) throw this.#rpcError(body, answer.error, status);
    this.#checkStatus(body, status, text);
    // No usable answer (a gateway's page, say), which a read may ask for again.
    if (!isRpcAnswer(answer) || !("result" in answer)) {
      throw new NotJsonRpcAnswerError({
        body,
        details: "the answer is not a JSON-RPC response",
        url: this.url,
      });
    }
    return answer.result;
  }

  /**
   * Several calls one caller needs together, in one HTTP request (a JSON-RPC batch): each call's outcome in
   * the order given. What fails for the request as a whole (no answer, an HTTP error status, an answer that
   * is not a batch's, one JSON-RPC error such as a rate limit) fails the whole batch as {@link call} fails.
   * An endpoint that takes no batches ({@link refusesBatches}) is remembered as one, and asked this batch and
   * every later one call by call, a few at a time.
   */
  async callBatch(calls: readonly RpcCall[]): Promise<RpcOutcome[]> {
    if (calls.length === 0) return [];
    if (calls.length === 1 || this.#refusesBatches) return this.#oneByOne(calls);
    const bodies = calls.map((call) => this.#body(call));
    const { status, text } = await this.#post(bodies);
    // A server error is the gateway's, as for one call.
    if (status >= 500) this.#checkStatus(bodies, status, text);
    const answer = parseJson(text);
    if (!Array.isArray(answer)) {
      if (refusesBatches(status, answer)) {
        this.#refusesBatches = true;
        return this.#oneByOne(calls);
      }
      // Another error object (a rate limit, say) is the batch's failure, as it would be a call's.
      if (isRpcAnswer(answer) && answer.error != null)
        throw this.#rpcError(bodies[0] as RpcBody, answer.error, status);
      this.#checkStatus(bodies, status, text);
      throw new NotJsonRpcAnswerError({
        body: bodies,
        details: "the answer is not a JSON-RPC batch response",
        url: this.url,
      });
    }
    // Matched by id, whatever order they come in (and a string id for a number, as some proxies echo it).
    const byId = new Map<string, RpcAnswer>();
    for (const item of answer) if (isRpcAnswer(item)) byId.set(String((item as { id?: unknown }).id), item);
    return bodies.map((body) => {
      const item = byId.get(String(body.id));
      if (item?.error != null) return { error: this.#rpcError(body, item.error, status) };
      if (item === undefined || !("result" in item)) {
        throw new NotJsonRpcAnswerError({
          body,
          details: "the batch answer lacks a call's response",
          url: this.url,
        });
      }
      return { result: item.result };
    });
  }

  /** The calls one at a time, at most {@link ONE_BY_ONE_IN_FLIGHT} at once. */
  #oneByOne(calls: readonly RpcCall[]): Promise<RpcOutcome[]> {
    return mapLimited(calls, ONE_BY_ONE_IN_FLIGHT, (call) =>
      this.call(call.method, call.params).then(
        (result): RpcOutcome => ({ result }),
        (error: unknown): RpcOutcome => {
          if (error instanceof RpcRequestError) return { error };
          throw error;
        },
      ),
    );
  }

  #body({ method, params }: RpcCall): RpcBody {
    return { jsonrpc: "2.0", id: this.#nextId++, method, ...(params === undefined ? {} : { params }) };
  }

  #rpcError(body: RpcBody, error: unknown, status: number): RpcRequestError {
    const url = this.url;
    return new RpcRequestError({
      body,
      error: error as { code: number; message: string },
      url,
      ...(status >= 300 ? { status } : {}),
    });
  }

  #checkStatus(body: RpcBody | RpcBody[], status: number, text: string): void {
    if (status < 200 || status > 299) {
      throw new HttpRequestError({
        body,
        details: text.slice(0, 200) || `HTTP ${status}`,
        status,
        url: this.url,
      });
    }
  }

  /** One HTTP POST: the status and the (decompressed) body, or viem's `HttpRequestError` / `TimeoutError`. */
  #post(rpcBody: RpcBody | RpcBody[]): Promise<{ status: number; text: string }> {
    const payload = JSON.stringify(rpcBody);
    const url = this.url;
    return new Promise((resolve, reject) => {
      let settled = false;
      const finish = (error: unknown, answer?: { status: number; text: string }) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (answer) resolve(answer);
        else reject(error);
      };
      const request = this.#request(
        this.#url,
        {
          method: "POST",
          agent: this.#agent,
          headers: { ...this.#headers, "content-length": Buffer.byteLength(payload) },
        },
        (response) => {
          const body = decoded(response);
          const chunks: Buffer[] = [];
          let size = 0;
          body.on("data", (chunk: Buffer) => {
            size += chunk.length;
            if (size <= this.#maxResponseBytes) {
              chunks.push(chunk);
              return;
            }
            const details = `the answer exceeded ${this.#maxResponseBytes} bytes`;
            finish(new HttpRequestError({ body: rpcBody, details, url }));
            request.destroy();
          });
          body.on("error", (cause) => finish(new HttpRequestError({ body: rpcBody, cause, url })));
          body.on("end", () =>
            finish(undefined, {
              status: response.statusCode ?? 0,
              text: Buffer.concat(chunks).toString("utf8"),
            }),
          );
        },
      );
      const timer = setTimeout(() => {
        finish(new TimeoutError({ body: rpcBody, url }));
        request.destroy();
      }, this.timeoutMs);
      request.on("error", (cause) => finish(new HttpRequestError({ body: rpcBody, cause, url })));
      request.end(payload);
    });
  }
}

/** The response's body, decompressed as its `content-encoding` says (the size limit counts what comes out). */
function decoded(response: http.IncomingMessage): NodeJS.ReadableStream {
  const encoding = String(response.headers["content-encoding"] ?? "")
    .trim()
    .toLowerCase();
  const decoder =
    encoding === "gzip" || encoding === "x-gzip"
      ? createGunzip()
      : encoding === "deflate"
        ? createInflate()
        : encoding === "br"
          ? createBrotliDecompress()
          : undefined;
  if (!decoder) return response;
  response.on("error", (error) => decoder.destroy(error));
  return response.pipe(decoder);
}

/**
 * Whether an answer to a batch says the endpoint takes no batches (of that size): a JSON-RPC error object
 * in place of the array whose code says so (invalid request, or no such method), or a client error status
 * other than those that a single call would meet too (credentials, a time-out, a rate limit).
 */
function refusesBatches(status: number, answer: unknown): boolean {
  if (status >= 200 && status <= 299) {
    const code = isRpcAnswer(answer) ? (answer.error as { code?: unknown } | undefined)?.code : undefined;
    return code === -32600 || code === -32601;
  }
  return status >= 400 && status <= 499 && ![401, 403, 408, 429].includes(status);
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function isRpcAnswer(value: unknown): value is RpcAnswer {
  return (
    typeof value === "object" &&
    value !== null &&
    !Array.isArray(value) &&
    ("result" in value || "error" in value)
  );
}
