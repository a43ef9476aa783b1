import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";

/** What the proxy does with one JSON-RPC request: pass it on, cut the connection, or answer a status. */
/** Forward the request, cut its connection, or answer it here: `status` with `body` (JSON), or a text page. */
export type ProxyAction = "forward" | "drop" | { status: number; body?: string };

/** A listening JSON-RPC proxy in front of a real endpoint. */
export interface RpcProxy {
  url: string;
  /**
   * The JSON-RPC methods of every request received, in order, dropped ones included; a batch's as its
   * methods joined by commas.
   */
  readonly methods: string[];
  /** How many requests for `method` were received. */
  count(method: string): number;
  close(): Promise<void>;
}

async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

/**
 * A real HTTP proxy on 127.0.0.1 in front of `upstream` (a devnet endpoint) that decides per request, by
 * its JSON-RPC method (a batch's methods joined by commas), how many of that method it has seen (1 for the
 * first) and its raw body, whether to forward it,
 * to drop the connection without an answer (what a client meets when a server closes the keep-alive socket
 * it reuses), or to answer an HTTP status as a gateway would.
 * @example const proxy = await startRpcProxy(devnet.evm.rpcUrl, (method, nth) => method === "eth_getBalance" && nth <= 2 ? "drop" : "forward");
 */
export async function startRpcProxy(
  upstream: string,
  decide: (method: string, nth: number, body: string) => ProxyAction,
): Promise<RpcProxy> {
  const methods: string[] = [];
  const count = (method: string) => methods.filter((m) => m === method).length;
  const server = createServer(async (request, response) => {
    const body = await readBody(request);
    let method = "unknown";
    try {
      const parsed = JSON.parse(body) as { method?: unknown } | { method?: unknown }[];
      const calls = Array.isArray(parsed) ? parsed : [parsed];
      if (calls.every((call) => typeof call.method === "string"))
        method = calls.map((call) => call.method).join(",");
    } catch {}
    methods.push(method);
    const action = decide(method, count(method), body);
    if (action === "drop") {
      request.socket.destroy();
      return;
    }
    if (action !== "forward") {
      if (action.body !== undefined)
        response.writeHead(action.status, { "content-type": "application/json" }).end(action.body);
      else response.writeHead(action.status, { "content-type": "text/plain" }).end("proxy says no");
      return;
    }
    try {
      const answer = await fetch(upstream, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body,
      });
      response
        .writeHead(answer.status, {
          "content-type": answer.headers.get("content-type") ?? "application/json",
        })
        .end(Buffer.from(await answer.arrayBuffer()));
    } catch {
      response.writeHead(502).end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    methods,
    count,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
