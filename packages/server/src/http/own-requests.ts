/**
 * The service's requests to itself: `/mcp` checks each key and runs each tool through `/v1`, over this
 * machine's network, so every one of them comes from the service's own address. They carry a secret made
 * for this process, and the per-address limit (which the `/mcp` request itself passed, counted for its
 * caller's address) does not count them again; the per-credential limit does, as for any request.
 * Without it, one address's `/mcp` requests, with made-up keys even, used up the limit of the service's own
 * address, and every other caller of `/mcp` was refused.
 */
import { randomBytes, timingSafeEqual } from "node:crypto";
import type { FastifyRequest } from "fastify";

const HEADER = "x-svc-own-request";

export class OwnRequests {
  readonly #secret = randomBytes(32).toString("base64url");

  /**
   * A `fetch` that marks its requests to `origin` (the service's own, known once it listens) as the service's
   * own; a request to anywhere else (an x402 resource a client might probe with it) goes out unmarked.
   */
  fetchFor(origin: () => string): typeof fetch {
    return (input, init) => {
      const url = input instanceof Request ? input.url : String(input);
      if (new URL(url).origin !== origin()) return fetch(input, init);
      const headers = new Headers(init?.headers);
      headers.set(HEADER, this.#secret);
      return fetch(input, { ...init, headers });
    };
  }

  /** Whether `request` is one of the service's own (made with {@link OwnRequests.fetchFor}). */
  isOwn(request: FastifyRequest): boolean {
    const header = request.headers[HEADER];
    if (typeof header !== "string") return false;
    const [given, secret] = [Buffer.from(header), Buffer.from(this.#secret)];
    return given.length === secret.length && timingSafeEqual(given, secret);
  }
}
