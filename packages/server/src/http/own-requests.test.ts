import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { FastifyRequest } from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { OwnRequests } from "./own-requests.ts";

const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) await new Promise((resolve) => server.close(resolve));
});

/** A server on loopback that keeps the headers of every request it is sent; `/moved` redirects to `to`. */
async function recorder(to?: string): Promise<{ origin: string; seen: IncomingHttpHeaders[] }> {
  const seen: IncomingHttpHeaders[] = [];
  const server = createServer((request, response) => {
    seen.push(request.headers);
    if (request.url === "/moved" && to) response.writeHead(307, { location: `${to}/landed` }).end();
    else response.end("ok");
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

const asRequest = (headers: IncomingHttpHeaders) => ({ headers }) as FastifyRequest;
const MARKS = ["x-svc-own-request", "x-svc-own-request-for"];

describe("OwnRequests", () => {
  it("marks requests to the service's own origin, made for a client, with that client and a secret of this instance only", async () => {
    const elsewhere = await recorder();
    const service = await recorder(elsewhere.origin);
    const own = new OwnRequests();
    const ownFetch = own.fetchFor(() => service.origin);
    const read = async (response: Promise<Response>) => (await response).text();

    await own.actFor("203.0.113.9", async () => {
      await read(ownFetch(`${service.origin}/v1/auth/me`, { headers: { accept: "application/json" } }));
      await read(
        ownFetch(new Request(`${service.origin}/v1/auth/me`, { headers: { authorization: "Bearer k" } })),
      );
      // Anything else the same fetch is pointed at (an x402 resource a client probes) goes out unmarked.
      await read(ownFetch(`${elsewhere.origin}/paid`));
      await read(ownFetch(new Request(`${elsewhere.origin}/paid`)));
      // A redirect is not followed: the mark would go along to wherever it leads.
      await expect(read(ownFetch(`${service.origin}/moved`))).rejects.toThrow();
    });
    // Outside a request made for a client, nothing is marked.
    await read(ownFetch(`${service.origin}/v1/auth/me`));

    const [marked, markedRequest, , unmarked] = service.seen;
    expect(marked?.accept).toBe("application/json");
    expect(own.clientOf(asRequest(marked ?? {}))).toBe("203.0.113.9");
    // A Request keeps its own headers beside the marks.
    expect(markedRequest?.authorization).toBe("Bearer k");
    expect(own.clientOf(asRequest(markedRequest ?? {}))).toBe("203.0.113.9");
    expect(own.clientOf(asRequest(unmarked ?? {}))).toBeUndefined();
    expect(elsewhere.seen).toHaveLength(2);
    for (const headers of elsewhere.seen) for (const mark of MARKS) expect(headers).not.toHaveProperty(mark);

    // Guesses, and another instance's secret, are not the service's own.
    const forged = (secret: string) =>
      asRequest({ [MARKS[0] as string]: secret, [MARKS[1] as string]: "10.0.0.1" });
    expect(own.clientOf(forged("svc"))).toBeUndefined();
    expect(own.clientOf(forged("A".repeat(43)))).toBeUndefined();
    expect(own.clientOf(forged("é".repeat(43)))).toBeUndefined();
    expect(new OwnRequests().clientOf(asRequest(marked ?? {}))).toBeUndefined();
  });
});
