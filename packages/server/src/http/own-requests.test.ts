import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { FastifyRequest } from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { OwnRequests } from "./own-requests.ts";

const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) await new Promise((resolve) => server.close(resolve));
});

/** A server on loopback that keeps the headers of every request it is sent. */
async function recorder(): Promise<{ origin: string; seen: IncomingHttpHeaders[] }> {
  const seen: IncomingHttpHeaders[] = [];
  const server = createServer((request, response) => {
    seen.push(request.headers);
    response.end("ok");
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

const asRequest = (headers: IncomingHttpHeaders) => ({ headers }) as FastifyRequest;

describe("OwnRequests", () => {
  it("marks requests to the service's own origin only, with a secret no other process (or instance) accepts", async () => {
    const service = await recorder();
    const elsewhere = await recorder();
    const own = new OwnRequests();
    const ownFetch = own.fetchFor(() => service.origin);

    await (
      await ownFetch(`${service.origin}/v1/auth/me`, { headers: { accept: "application/json" } })
    ).text();
    // Anything else the same fetch is pointed at (an x402 resource a client probes) is sent unmarked.
    await (await ownFetch(`${elsewhere.origin}/paid`)).text();
    await (await ownFetch(new Request(`${elsewhere.origin}/paid`))).text();

    const [marked] = service.seen;
    expect(marked?.accept).toBe("application/json");
    expect(own.isOwn(asRequest(marked ?? {}))).toBe(true);
    expect(elsewhere.seen).toHaveLength(2);
    for (const headers of elsewhere.seen) expect(Object.keys(headers)).not.toContain("x-svc-own-request");

    // Guesses, and another instance's secret, are not the service's own.
    expect(own.isOwn(asRequest({}))).toBe(false);
    expect(own.isOwn(asRequest({ "x-svc-own-request": "svc" }))).toBe(false);
    expect(own.isOwn(asRequest({ "x-svc-own-request": "é".repeat(43) }))).toBe(false);
    expect(new OwnRequests().isOwn(asRequest(marked ?? {}))).toBe(false);
  });
});
