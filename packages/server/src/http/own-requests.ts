/**
 * The service's requests to itself: `/mcp` checks each key and runs each tool through `/v1`, over this
 * machine's network, so all of them come from the service's own address. They carry a secret made for this
 * process and the address of the client they act for, and the per-address limit counts them for that client
 * (the per-credential limit counts them as any request). Counted for the service's own address instead, one
 * client's `/mcp` requests, with made-up keys even, used up that limit for every other client; not counted at
 * all, one `/mcp` request carrying a batch of tool calls made as many `/v1` calls uncounted.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { randomBytes, timingSafeEqual } from "node:crypto";
import type { FastifyRequest } from "fastify";

const SECRET_HEADER = "x-svc-own-request";
const CLIENT_HEADER = "x-svc-own-request-for";

export class OwnRequests {
  readonly #secret = randomBytes(32).toString("base64url");
  readonly #client = new AsyncLocalStorage<string>();

  /** Runs `work` for the client at `address`: the service's own requests it makes count for that address. */
  actFor<T>(address: string, work: () => T): T {
    return this.#client.run(address, work);
  }

  /**
   * A `fetch` that marks its requests to `origin` (the service's own, known once it listens) as the service's
   * own, made for the client of the {@link OwnRequests.actFor} it runs in, and follows no redirect (the mark
   * would go along). A request to anywhere else (an x402 resource a client might probe with it) goes out
   * unmarked.
   */
  fetchFor(origin: () => string): typeof fetch {
    return (input, init) => {
      const url = input instanceof Request ? input.url : String(input);
      const client = this.#client.getStore();
      if (new URL(url).origin !== origin() || client === undefined) return fetch(input, init);
      // A Request's own headers, unless `init` gives others (as fetch itself takes them).
      const headers = new Headers(init?.headers ?? (input instanceof Request ? input.headers : undefined));
      headers.set(SECRET_HEADER, this.#secret);
      headers.set(CLIENT_HEADER, client);
      return fetch(input, { ...init, headers, redirect: "error" });
    };
  }

  /**
   * The address of the client `request` was made for, when it is one of the service's own (made with
   * {@link OwnRequests.fetchFor}); undefined for any other request.
   */
  clientOf(request: FastifyRequest): string | undefined {
    const [secret, client] = [request.headers[SECRET_HEADER], request.headers[CLIENT_HEADER]];
    if (typeof secret !== "string" || typeof client !== "string") return undefined;
    const [given, expected] = [Buffer.from(secret), Buffer.from(this.#secret)];
    return given.length === expected.length && timingSafeEqual(given, expected) ? client : undefined;
  }
}
