/**
 * HTTP requests to URLs the service's callers name (x402 resources), guarded so that a caller cannot make
 * the service reach what only it can reach. The address checked is the address connected to: hostnames are
 * resolved here, every address is checked, and the connection is made to a checked one (undici's connector
 * asks our `lookup`), so a DNS answer that changes between a check and the connection (rebinding) cannot
 * pass. Redirects are followed by hand, each hop checked the same way.
 */
import { lookup as systemLookup } from "node:dns/promises";
import { isIP, type LookupFunction } from "node:net";
import { Agent, buildConnector, fetch as undiciFetch } from "undici";
import { AppError, errors } from "../internal/errors.ts";
import { DestinationGuard, sameHost } from "./destinations.ts";

/** One resolved address of a hostname. */
export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/** How long {@link OutboundFetcher.checkDestination} waits for a hostname to resolve before it lets it pass. */
export const DESTINATION_LOOKUP_WAIT_MS = 3_000;

/** Resolves a hostname to every address it has. */
export type Resolver = (hostname: string) => Promise<ResolvedAddress[]>;

/** Options of an {@link OutboundFetcher}; every field has a default fit for x402 resources. */
export interface OutboundFetcherOptions {
  /** CIDR ranges, addresses and hostnames exempt from the guard (`SVC_OUTBOUND_ALLOW`). Default none. */
  allow?: readonly string[];
  /** Default: the system resolver (`dns.lookup`, every address). Tests inject their own names. */
  resolve?: Resolver;
  /** Bound on one whole request, redirects and body included. Default 20 s. */
  timeoutMs?: number;
  /** Bound on a response body, after decompression. Default 2 MiB. */
  maxResponseBytes?: number;
  /** Redirects followed before giving up. Default 5. */
  maxRedirects?: number;
  /**
   * URLs of the service's own backends (its chain RPC endpoints, the authorization daemon): those on a
   * private, loopback or link-local address are never reached, whatever `allow` says, so that no caller can
   * make the service call them for it (a local EVM node takes `anvil_impersonateAccount` from anyone who
   * reaches it). Matched by port and address. A backend on a public address is anyone's to reach anyway, and
   * stays reachable (a CDN's address is shared by many sites). Default none.
   */
  backends?: readonly string[];
}

/** A request to send. Headers are the caller's; hop-by-hop headers and `Host` are not forwarded. */
export interface OutboundRequest {
  url: string;
  method?: string;
  headers?: Readonly<Record<string, string>>;
  body?: string | Uint8Array;
  /**
   * How many bytes of the answer's body to read, by its status: the rest is not waited for, and the body
   * is returned cut there. Default: all of it (more than the fetcher's bound is `resource_too_large`).
   */
  bodyBytes?: (status: number) => number;
}

/** A response read in full (or as far as the request's `bodyBytes` says). */
export interface OutboundResponse {
  /** The URL that answered (after redirects). */
  url: string;
  /** The method of the request that answered: a 303 (and a 301 or 302 to a POST) turns it into GET. */
  method: string;
  status: number;
  headers: Headers;
  body: Buffer;
  /** The URLs redirected to, in order; empty when the first answered. */
  redirects: string[];
}

const DEFAULT_TIMEOUT_MS = 20_000;
const DEFAULT_MAX_RESPONSE_BYTES = 2 * 1024 * 1024;
const DEFAULT_MAX_REDIRECTS = 5;
const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
/** Headers a caller may not set: the connection's own, and the target's identity. */
const NOT_FORWARDED = new Set([
  "host",
  "connection",
  "keep-alive",
  "proxy-connection",
  "transfer-encoding",
  "upgrade",
  "te",
  "trailer",
  "content-length",
]);
/** Headers that carry a credential or a payment: never sent on to another origin by a redirect. */
const ORIGIN_BOUND = new Set([
  "authorization",
  "cookie",
  "proxy-authorization",
  "payment-signature",
  "x-payment",
]);

/**
 * Fetches URLs for callers, refusing private, loopback, link-local and reserved destinations (400
 * ValidationError `destination_not_allowed`) unless exempt, following at most `maxRedirects` redirects by
 * hand, with a time bound (502 `resource_timeout`) and a size bound (502 `resource_too_large`).
 *
 * @example
 * ```ts
 * const outbound = new OutboundFetcher({ allow: config.outboundAllow });
 * const response = await outbound.fetch({ url: "https://api.example.com/weather" });
 * response.status; // 402
 * await outbound.close();
 * ```
 */
export class OutboundFetcher {
  readonly #guard: DestinationGuard;
  readonly #resolve: Resolver;
  readonly #agent: Agent;
  readonly #timeoutMs: number;
  readonly #maxResponseBytes: number;
  readonly #maxRedirects: number;
  readonly #backends: Backend[] = [];

  constructor(options: OutboundFetcherOptions = {}) {
    this.#guard = new DestinationGuard(options.allow ?? []);
    this.#resolve = options.resolve ?? systemResolve;
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.#maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
    this.#maxRedirects = options.maxRedirects ?? DEFAULT_MAX_REDIRECTS;
    for (const url of options.backends ?? []) this.addBackend(url);
    this.#agent = new Agent({
      // Each connection is checked where its port is known: its addresses against the guard and, with the
      // port, against the service's backends (an IP-literal host here, a name in the lookup it resolves by).
      connect: (target, callback) => {
        const port = portOf(target.protocol, target.port);
        const connect = buildConnector({ lookup: this.#lookupFor(port), timeout: this.#timeoutMs });
        const host = bareHost(target.hostname);
        if (isIP(host) === 0) return connect(target, callback);
        this.#refuseBackend(host, host, port).then(
          () => connect(target, callback),
          (error: Error) => callback(error, null),
        );
      },
      headersTimeout: this.#timeoutMs,
      bodyTimeout: this.#timeoutMs,
    });
  }

  /** Sends `request`, following redirects; the body is read in full. */
  async fetch(request: OutboundRequest): Promise<OutboundResponse> {
    const signal = AbortSignal.timeout(this.#timeoutMs);
    let url = this.#checkUrl(request.url);
    let method = (request.method ?? "GET").toUpperCase();
    let body = request.body;
    const headers = forwardedHeaders(request.headers ?? {});
    const redirects: string[] = [];
    try {
      for (;;) {
        const response = await undiciFetch(url, {
          method,
          headers,
          ...(body === undefined ? {} : { body }),
          redirect: "manual",
          dispatcher: this.#agent,
          signal,
        });
        const location = response.headers.get("location");
        if (!REDIRECT_STATUSES.has(response.status) || location === null) {
          return {
            url: url.href,
            method,
            status: response.status,
            headers: copyHeaders(response.headers),
            body: await this.#readBody(response, url, request.bodyBytes?.(response.status)),
            redirects,
          };
        }
        await response.body?.cancel();
        if (redirects.length >= this.#maxRedirects) {
          throw errors.resourceUnavailable(
            "too_many_redirects",
            `${request.url} redirected more than ${this.#maxRedirects} times`,
            { redirects },
          );
        }
        const next = this.#checkUrl(new URL(location, url).href);
        if (next.origin !== url.origin) dropOriginBound(headers);
        // As browsers do: 303 turns any method into GET, 301 and 302 turn POST into GET; both drop the body.
        if (
          response.status === 303 ||
          ((response.status === 301 || response.status === 302) && method === "POST")
        ) {
          if (method !== "HEAD") method = "GET";
          body = undefined;
          headers.delete("content-type");
        }
        redirects.push(next.href);
        url = next;
      }
    } catch (error) {
      throw this.#explain(error, url, signal);
    }
  }

  /**
   * Refuses now what {@link fetch} would refuse to connect to (400 `destination_not_allowed`): the URL's
   * form, an address the guard refuses (an IP-literal host, or any address a hostname resolves to now), and
   * the service's own backends. What cannot be told now, a hostname or a backend's name not resolving now or
   * not within {@link DESTINATION_LOOKUP_WAIT_MS} (or the request time limit, when shorter), passes: each
   * request checks it again.
   * @example await webhookOutbound.checkDestination("http://localhost:8545") // throws: a backend
   */
  async checkDestination(text: string): Promise<URL> {
    const url = this.#checkUrl(text);
    const host = bareHost(url.hostname);
    const port = portOf(url.protocol, url.port);
    // Both resolve names: the URL's, and the backends' (against an address given as such).
    const checked =
      isIP(host) !== 0
        ? this.#refuseBackend(host, host, port)
        : this.#checkedAddresses(host, undefined, port);
    checked.catch(() => {}); // a verdict that comes after the wait is not waited for
    let timer: NodeJS.Timeout | undefined;
    const waited = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, Math.min(this.#timeoutMs, DESTINATION_LOOKUP_WAIT_MS));
    });
    try {
      await Promise.race([checked, waited]);
    } catch (error) {
      if (error instanceof AppError) throw error;
    } finally {
      clearTimeout(timer);
    }
    return url;
  }

  /**
   * Adds one of the service's backends (see {@link OutboundFetcherOptions.backends}); the service adds its own
   * address once it listens (a request to itself would come from this machine, with headers the caller chose).
   */
  addBackend(url: string): void {
    const parsed = new URL(url);
    this.#backends.push({
      hostname: bareHost(parsed.hostname),
      port: portOf(parsed.protocol, parsed.port),
    });
  }

  /** Closes the connections kept open. */
  close(): Promise<void> {
    return this.#agent.close();
  }

  /** A URL an outbound request may be sent to; an IP-literal host is checked here (no lookup happens). */
  #checkUrl(text: string): URL {
    let url: URL;
    try {
      url = new URL(text);
    } catch {
      throw errors.destinationNotAllowed(`Not a URL: ${JSON.stringify(text.slice(0, 200))}`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") {
      throw errors.destinationNotAllowed(`Only http and https URLs can be fetched, not ${url.protocol}`, {
        url: url.href.slice(0, 200),
      });
    }
    if (url.username !== "" || url.password !== "") {
      throw errors.destinationNotAllowed("URLs with credentials (user:password@) are not fetched");
    }
    const host = bareHost(url.hostname);
    if (isIP(host) !== 0) {
      const verdict = this.#guard.checkAddress(host);
      if (!verdict.allowed) {
        throw errors.destinationNotAllowed(
          `Refusing to connect to ${host}: a ${verdict.kind} address (${verdict.range}); outbound requests reach public addresses only unless SVC_OUTBOUND_ALLOW exempts them`,
          { host, kind: verdict.kind, range: verdict.range },
        );
      }
    }
    return url;
  }

  /** undici's connector resolves through this: only checked addresses are ever returned to connect to. */
  #lookupFor(port: number): LookupFunction {
    return (hostname, options, callback) =>
      this.#checkedAddresses(hostname, options.family, port).then(
        (addresses) => {
          if (options.all) (callback as (e: null, a: ResolvedAddress[]) => void)(null, addresses);
          else callback(null, addresses[0]?.address ?? "", addresses[0]?.family ?? 4);
        },
        (error: NodeJS.ErrnoException) => callback(error, "", 4),
      );
  }

  async #checkedAddresses(hostname: string, family: unknown, port: number): Promise<ResolvedAddress[]> {
    const all = await this.#resolve(hostname);
    const addresses = family === 4 || family === 6 ? all.filter((a) => a.family === family) : all;
    if (addresses.length === 0) {
      throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" });
    }
    // Every address is checked, not only the first: which one is connected to is the connector's choice. The
    // guard first: it needs no lookup, where the backends' names may have to be resolved.
    for (const { address } of this.#guard.isExemptHost(hostname) ? [] : addresses) {
      const verdict = this.#guard.checkAddress(address);
      if (!verdict.allowed) {
        // The address itself is not told: it would make the service an oracle for internal names.
        throw errors.destinationNotAllowed(
          `Refusing to connect to ${hostname}: it resolves to a ${verdict.kind} address; outbound requests reach public addresses only unless SVC_OUTBOUND_ALLOW exempts them`,
          { host: hostname, kind: verdict.kind },
        );
      }
    }
    for (const { address } of addresses) await this.#refuseBackend(hostname, address, port);
    return addresses;
  }

  /** Refuses `address`:`port` when it is one of the service's non-public backends, however the caller named it. */
  async #refuseBackend(named: string, address: string, port: number): Promise<void> {
    for (const backend of this.#backends) {
      if (backend.port !== port) continue;
      const resolved = await this.#addressesOf(backend);
      // A backend whose name does not resolve now could be anywhere: every non-public address on its port is
      // taken for it (failing closed), until the name resolves again.
      const backendAddresses = (resolved ?? [address]).filter(
        (backendAddress) => !PUBLIC_ONLY.checkAddress(backendAddress).allowed,
      );
      if (backendAddresses.some((backendAddress) => sameHost(address, backendAddress))) {
        throw errors.destinationNotAllowed(
          `Refusing to connect to ${named}:${port}: it is this service itself or one of its own backends (a chain's RPC endpoint, the authorization daemon), which outbound requests never reach`,
          { host: named, kind: "backend" },
        );
      }
    }
  }

  /**
   * A backend's addresses: its IP literal, or its name resolved at most once a minute (the operator's name);
   * undefined while the name does not resolve (a failure is not kept: the next check resolves again).
   */
  async #addressesOf(backend: Backend): Promise<string[] | undefined> {
    if (isIP(backend.hostname) !== 0) return [backend.hostname];
    const now = Date.now();
    if (!backend.resolved || now - backend.resolved.at > BACKEND_RESOLVE_MS) {
      const resolved = {
        at: now,
        addresses: this.#resolve(backend.hostname).then((found) => found.map((entry) => entry.address)),
      };
      backend.resolved = resolved;
      resolved.addresses.catch(() => {
        if (backend.resolved === resolved) delete backend.resolved;
      });
    }
    return backend.resolved.addresses.catch(() => undefined);
  }

  async #readBody(
    response: Awaited<ReturnType<typeof undiciFetch>>,
    url: URL,
    upTo?: number,
  ): Promise<Buffer> {
    const chunks: Buffer[] = [];
    let size = 0;
    if (upTo !== undefined) {
      // Only the start is wanted: read until it has arrived, and let the rest go unread.
      if (response.body === null) return Buffer.alloc(0);
      if (upTo <= 0) {
        await response.body.cancel().catch(() => undefined);
        return Buffer.alloc(0);
      }
      for await (const chunk of response.body) {
        chunks.push(Buffer.from(chunk));
        size += chunk.byteLength;
        if (size >= upTo) break;
      }
      await response.body.cancel().catch(() => undefined);
      return Buffer.concat(chunks, size).subarray(0, upTo);
    }
    const declared = Number(response.headers.get("content-length") ?? Number.NaN);
    if (declared > this.#maxResponseBytes) {
      await response.body?.cancel();
      throw this.#tooLarge(url);
    }
    if (response.body === null) return Buffer.alloc(0);
    for await (const chunk of response.body) {
      size += chunk.byteLength;
      if (size > this.#maxResponseBytes) {
        await response.body.cancel().catch(() => undefined);
        throw this.#tooLarge(url);
      }
      chunks.push(Buffer.from(chunk));
    }
    return Buffer.concat(chunks, size);
  }

  #tooLarge(url: URL): AppError {
    return errors.resourceUnavailable(
      "resource_too_large",
      `The response of ${url.origin} is larger than ${this.#maxResponseBytes} bytes`,
      { maxBytes: this.#maxResponseBytes },
    );
  }

  /** Our own refusals pass through; undici's failures become 502s that say what happened. */
  #explain(error: unknown, url: URL, signal: AbortSignal): unknown {
    for (let cause: unknown = error; cause instanceof Error; cause = cause.cause) {
      if (cause instanceof AppError) return cause;
    }
    if (signal.aborted) {
      return errors.resourceUnavailable(
        "resource_timeout",
        `${url.origin} did not answer within ${this.#timeoutMs} ms`,
        { timeoutMs: this.#timeoutMs },
        error,
      );
    }
    const code = errorCode(error);
    return errors.resourceUnavailable(
      "resource_unreachable",
      `${url.origin} could not be reached${code ? ` (${code})` : ""}`,
      code ? { code } : undefined,
      error,
    );
  }
}

/** The system resolver, every address, in the resolver's order. */
async function systemResolve(hostname: string): Promise<ResolvedAddress[]> {
  const found = await systemLookup(hostname, { all: true, verbatim: true });
  return found.map(({ address, family }) => ({ address, family: family === 6 ? 6 : 4 }));
}

/**
 * The headers of a request to `from` as they may go to `to`: without credentials and payments when `to` is
 * another origin (as a redirect carries them).
 * @example headersForOrigin({ authorization: "Bearer x" }, "https://a.example/", "https://b.example/") // {}
 */
export function headersForOrigin(
  headers: Readonly<Record<string, string>>,
  from: string,
  to: string,
): Record<string, string> {
  if (new URL(from).origin === new URL(to).origin) return { ...headers };
  return Object.fromEntries(
    Object.entries(headers).filter(([name]) => !ORIGIN_BOUND.has(name.toLowerCase())),
  );
}

function dropOriginBound(headers: Headers): void {
  for (const name of ORIGIN_BOUND) headers.delete(name);
}

function forwardedHeaders(input: Readonly<Record<string, string>>): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(input)) {
    if (!NOT_FORWARDED.has(name.toLowerCase())) headers.set(name, value);
  }
  return headers;
}

function copyHeaders(source: Iterable<[string, string]>): Headers {
  const headers = new Headers();
  for (const [name, value] of source) headers.append(name, value);
  return headers;
}

/** One of the service's backends, by port and host, with its name's addresses once resolved. */
interface Backend {
  hostname: string;
  port: number;
  resolved?: { at: number; addresses: Promise<string[]> };
}

/** How long a backend's resolved addresses are used before its name is resolved again. */
const BACKEND_RESOLVE_MS = 60_000;

/** The guard with nothing exempt: what it refuses is not public. */
const PUBLIC_ONLY = new DestinationGuard();

/** A URL's hostname as the resolver and the guard take it: an IPv6 literal without its brackets. */
function bareHost(hostname: string): string {
  return hostname.replace(/^\[|\]$/g, "");
}

/** The port a URL's connection goes to: the explicit one, or its scheme's default. */
function portOf(protocol: string, port: string): number {
  if (port !== "") return Number(port);
  return protocol === "https:" || protocol === "wss:" ? 443 : 80;
}

/** The first `code` (ECONNREFUSED, ENOTFOUND, UND_ERR_…) along an error's cause chain. */
function errorCode(error: unknown): string | undefined {
  for (let cause: unknown = error; cause instanceof Error; cause = cause.cause) {
    const code = (cause as { code?: unknown }).code;
    if (typeof code === "string") return code;
  }
  return undefined;
}
