import http from "node:http";
import type { AddressInfo } from "node:net";
import { gzipSync } from "node:zlib";
import { createPublicClient, HttpRequestError, RpcRequestError } from "viem";
import { afterEach, describe, expect, it } from "vitest";
import { JsonRpcEndpoint, jsonRpcHttp } from "./json-rpc-http.ts";

/** A JSON-RPC endpoint on a real socket: answers each call with `answer`, and notes what it saw. */
async function endpoint(
  answer: (body: { id: number; method: string }) => { status?: number; text: string; gzip?: boolean },
) {
  const seen = { requests: 0, connections: new Set<unknown>(), authorization: [] as (string | undefined)[] };
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      seen.requests++;
      seen.connections.add(request.socket);
      seen.authorization.push(request.headers.authorization);
      const { status = 200, text, gzip = false } = answer(JSON.parse(Buffer.concat(chunks).toString("utf8")));
      response
        .writeHead(status, {
          "content-type": "application/json",
          ...(gzip ? { "content-encoding": "gzip" } : {}),
        })
        .end(gzip ? gzipSync(text) : text);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  servers.push(server);
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}
const servers: http.Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

const failure = (promise: Promise<unknown>) =>
  promise.then(
    () => Promise.reject(new Error("expected a failure")),
    (e: unknown) => e,
  );
const clientOf = (url: string, maxResponseBytes?: number) =>
  createPublicClient({
    transport: jsonRpcHttp(url, { timeoutMs: 2_000, ...(maxResponseBytes ? { maxResponseBytes } : {}) }),
  });

describe("jsonRpcHttp", () => {
  it("answers calls in order over one kept-alive connection", async () => {
    let height = 0;
    const node = await endpoint(({ id }) => ({
      text: JSON.stringify({ jsonrpc: "2.0", id, result: `0x${(++height).toString(16)}` }),
    }));
    const client = clientOf(node.url);
    const heights: bigint[] = [];
    for (let i = 0; i < 5; i++) heights.push(await client.getBlockNumber({ cacheTime: 0 }));
    expect(heights).toEqual([1n, 2n, 3n, 4n, 5n]);
    expect(node.seen.requests).toBe(5);
    expect(node.seen.connections.size).toBe(1);
  });

  it("sends a URL's credentials as Basic auth", async () => {
    const node = await endpoint(({ id }) => ({
      text: JSON.stringify({ jsonrpc: "2.0", id, result: "0x1" }),
    }));
    const withCredentials = node.url.replace("http://", "http://user:p%40ss@");
    await clientOf(withCredentials).getChainId();
    expect(node.seen.authorization).toEqual([`Basic ${Buffer.from("user:p@ss").toString("base64")}`]);
  });

  it("keeps a JSON-RPC error's code, even under an HTTP error status", async () => {
    const node = await endpoint(({ id }) => ({
      status: 400,
      text: JSON.stringify({ jsonrpc: "2.0", id, error: { code: -32602, message: "invalid params" } }),
    }));
    const error = await failure(clientOf(node.url).getChainId());
    expect(error).toBeInstanceOf(Error);
    const rpc = (error as { walk(fn: (e: unknown) => boolean): unknown }).walk(
      (e) => e instanceof RpcRequestError,
    );
    expect(rpc).toMatchObject({ code: -32602, status: 400 });
  });

  it("refuses an answer that is not JSON-RPC, and one larger than the limit, as HttpRequestError", async () => {
    const html = await endpoint(() => ({ text: "<html>gateway</html>" }));
    const huge = await endpoint(({ id }) => ({
      text: JSON.stringify({ jsonrpc: "2.0", id, result: "0x".padEnd(5_000, "0") }),
    }));
    for (const [client, details] of [
      [clientOf(html.url), "the answer is not a JSON-RPC response"],
      [clientOf(huge.url, 1_000), "the answer exceeded 1000 bytes"],
    ] as const) {
      const error = (await failure(client.getChainId())) as { walk(fn: (e: unknown) => boolean): unknown };
      expect(error.walk((e) => e instanceof HttpRequestError)).toMatchObject({ details });
    }
  });

  it("reads a compressed answer", async () => {
    const node = await endpoint(({ id }) => ({
      gzip: true,
      text: JSON.stringify({ jsonrpc: "2.0", id, result: "0x2105" }),
    }));
    expect(await clientOf(node.url).getChainId()).toBe(8453);
  });

  it("takes an error answer of any shape for an error, never for a result", async () => {
    const node = await endpoint(({ id }) => ({
      text: JSON.stringify({ jsonrpc: "2.0", id, error: "rate limited" }),
    }));
    const error = (await failure(clientOf(node.url).getChainId())) as {
      walk(fn: (e: unknown) => boolean): unknown;
    };
    expect(error.walk((e) => e instanceof RpcRequestError)).toBeInstanceOf(RpcRequestError);
  });

  it("names the URL as configured in its errors (what the chain layer scrubs)", async () => {
    const html = await endpoint(() => ({ text: "<html>gateway</html>" }));
    const configured = `${html.url.replace("127.0.0.1", "LOCALHOST")}?key=K3y`;
    const error = (await failure(clientOf(configured).getChainId())) as {
      walk(fn: (e: unknown) => boolean): unknown;
    };
    expect(error.walk((e) => e instanceof HttpRequestError)).toMatchObject({
      url: configured,
      status: undefined,
    });
  });

  it("sends one caller's reads as one batch: one request, each call's outcome in order", async () => {
    const bodies: unknown[] = [];
    const node = await endpoint((body) => {
      bodies.push(body);
      const calls = body as unknown as { id: number; method: string }[];
      // Answered out of order, as a node may: matched by id.
      const answers = calls
        .map(({ id, method }) =>
          method === "eth_estimateGas"
            ? { jsonrpc: "2.0", id, error: { code: 3, message: "execution reverted" } }
            : { jsonrpc: "2.0", id, result: method === "eth_chainId" ? "0x2105" : "0x7" },
        )
        .reverse();
      return { text: JSON.stringify(answers) };
    });
    const outcomes = await new JsonRpcEndpoint(node.url, { timeoutMs: 2_000 }).callBatch([
      { method: "eth_chainId" },
      { method: "eth_estimateGas", params: [{}] },
      { method: "eth_blockNumber" },
    ]);
    expect(node.seen.requests).toBe(1);
    expect(Array.isArray(bodies[0])).toBe(true);
    expect(outcomes[0]).toEqual({ result: "0x2105" });
    expect((outcomes[1] as { error: RpcRequestError }).error).toBeInstanceOf(RpcRequestError);
    expect((outcomes[1] as { error: RpcRequestError }).error.code).toBe(3);
    expect(outcomes[2]).toEqual({ result: "0x7" });
  });

  it("asks an endpoint that takes no batches the calls one by one, and remembers it", async () => {
    const calls = [{ method: "eth_chainId" }, { method: "eth_blockNumber" }];
    const single = (body: { id: number; method: string }) => ({
      text: JSON.stringify({ jsonrpc: "2.0", id: body.id, result: body.method }),
    });
    const refusals = [
      {
        refusal: {
          text: JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32600, message: "no batches" } }),
        },
        remembered: true,
      },
      { refusal: { status: 400, text: "batch requests are not supported" }, remembered: true },
      { refusal: { status: 413, text: "too large" }, remembered: true },
    ];
    for (const { refusal } of refusals) {
      let batches = 0;
      const node = await endpoint((body) => {
        if (!Array.isArray(body)) return single(body);
        batches++;
        return refusal;
      });
      const rpc = new JsonRpcEndpoint(node.url, { timeoutMs: 2_000 });
      for (let round = 0; round < 2; round++) {
        expect(await rpc.callBatch(calls)).toEqual([
          { result: "eth_chainId" },
          { result: "eth_blockNumber" },
        ]);
      }
      expect(batches).toBe(1);
      expect(node.seen.requests).toBe(5);
    }

    // A rate limit is no refusal, whether an HTTP status or a JSON-RPC error: the batch fails as a call would
    // (the chain layer retries what is transient), and no call is sent again on its own.
    const limited = await endpoint(() => ({ status: 429, text: "slow down" }));
    const limit = await failure(new JsonRpcEndpoint(limited.url, { timeoutMs: 2_000 }).callBatch(calls));
    expect(limit).toBeInstanceOf(HttpRequestError);
    expect(limit).toMatchObject({ status: 429 });
    expect(limited.seen.requests).toBe(1);
    const exceeded = await endpoint(() => ({
      text: JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32005, message: "limit exceeded" } }),
    }));
    const rpcLimit = await failure(new JsonRpcEndpoint(exceeded.url, { timeoutMs: 2_000 }).callBatch(calls));
    expect(rpcLimit).toBeInstanceOf(RpcRequestError);
    expect(rpcLimit).toMatchObject({ code: -32005 });
    expect(exceeded.seen.requests).toBe(1);

    // Ids echoed as strings still match their calls.
    const echoing = await endpoint((body) => ({
      text: JSON.stringify(
        (body as unknown as { id: number; method: string }[]).map(({ id, method }) => ({
          jsonrpc: "2.0",
          id: String(id),
          result: method,
        })),
      ),
    }));
    expect(await new JsonRpcEndpoint(echoing.url, { timeoutMs: 2_000 }).callBatch(calls)).toEqual([
      { result: "eth_chainId" },
      { result: "eth_blockNumber" },
    ]);

    const short = await endpoint((body) => ({
      text: JSON.stringify([
        { jsonrpc: "2.0", id: (body as unknown as { id: number }[])[0]?.id, result: "0x1" },
      ]),
    }));
    const lacking = await failure(
      new JsonRpcEndpoint(short.url, { timeoutMs: 2_000 }).callBatch([
        { method: "eth_chainId" },
        { method: "eth_blockNumber" },
      ]),
    );
    expect(lacking).toBeInstanceOf(HttpRequestError);
    expect(lacking).toMatchObject({ details: "the batch answer lacks a call's response" });
  });
});
