import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { METHODS, type MethodContext } from "./methods.ts";
import { RPC_ERROR, RpcError } from "./rpc-error.ts";
import { stringifyRpc } from "./rpc-json.ts";
import { attachSubscriptions } from "./subscriptions.ts";

const MAX_BODY_BYTES = 2 * 1024 * 1024;
/**
 * How long an idle keep-alive connection stays open: longer than HTTP clients keep theirs (undici, which
 * Node's fetch uses, closes an idle socket after 4 s, or 2 s before the timeout a server advertises; Node
 * advertises this one), so the client closes first. A server that closes first races a client reusing the
 * socket, and the request on it dies with ECONNRESET ("fetch failed"); at 5 s, a loaded machine whose event
 * loop stalled for 2 s lost that race.
 */
export const KEEP_ALIVE_TIMEOUT_MS = 65_000;

type JsonRpcId = string | number | null;

interface JsonRpcReply {
  jsonrpc: "2.0";
  id: JsonRpcId;
  result?: unknown;
  error?: { code: number; message: string; data?: unknown };
}

function errorReply(id: JsonRpcId, err: unknown): JsonRpcReply {
  if (err instanceof RpcError) {
    const error: JsonRpcReply["error"] = { code: err.code, message: err.message };
    if (err.data !== undefined) error.data = err.data;
    return { jsonrpc: "2.0", error, id };
  }
  const message = err instanceof Error ? err.message : String(err);
  return {
    jsonrpc: "2.0",
    error: { code: RPC_ERROR.internalError, message: `Internal error: ${message}` },
    id,
  };
}

async function handleOne(request: unknown, ctx: MethodContext): Promise<JsonRpcReply> {
  if (typeof request !== "object" || request === null || Array.isArray(request)) {
    return errorReply(null, new RpcError(RPC_ERROR.invalidRequest, "Invalid request"));
  }
  const { jsonrpc, method, params, id: rawId } = request as Record<string, unknown>;
  const id: JsonRpcId =
    typeof rawId === "string" || typeof rawId === "number" || rawId === null ? rawId : null;
  if (jsonrpc !== "2.0" || typeof method !== "string") {
    return errorReply(id, new RpcError(RPC_ERROR.invalidRequest, "Invalid request"));
  }
  const handler = Object.hasOwn(METHODS, method) ? METHODS[method] : undefined;
  if (handler === undefined)
    return errorReply(id, new RpcError(RPC_ERROR.methodNotFound, "Method not found"));
  if (params !== undefined && params !== null && !Array.isArray(params)) {
    return errorReply(id, new RpcError(RPC_ERROR.invalidParams, "Invalid params: expected an array"));
  }
  try {
    const result = await handler((params ?? []) as readonly unknown[], ctx);
    return { jsonrpc: "2.0", result, id };
  } catch (err) {
    return errorReply(id, err);
  }
}

async function readBody(req: IncomingMessage): Promise<string | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    const buf = chunk as Buffer;
    size += buf.length;
    if (size > MAX_BODY_BYTES) return undefined;
    chunks.push(buf);
  }
  return Buffer.concat(chunks).toString("utf8");
}

async function handleHttp(req: IncomingMessage, res: ServerResponse, ctx: MethodContext): Promise<void> {
  const send = (status: number, body: string): void => {
    res.writeHead(status, { "content-type": "application/json" });
    res.end(body);
  };
  if (req.method !== "POST") {
    res.writeHead(405, { allow: "POST", "content-type": "text/plain" });
    res.end("Used HTTP Method is not allowed. POST or OPTIONS is required");
    return;
  }
  const body = await readBody(req);
  if (body === undefined) {
    send(413, stringifyRpc(errorReply(null, new RpcError(RPC_ERROR.invalidRequest, "Request too large"))));
    return;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    send(200, stringifyRpc(errorReply(null, new RpcError(RPC_ERROR.parseError, "Parse error"))));
    return;
  }
  if (Array.isArray(parsed)) {
    if (parsed.length === 0) {
      send(200, stringifyRpc(errorReply(null, new RpcError(RPC_ERROR.invalidRequest, "Invalid request"))));
      return;
    }
    const replies = [];
    for (const request of parsed) replies.push(await handleOne(request, ctx));
    send(200, stringifyRpc(replies));
    return;
  }
  send(200, stringifyRpc(await handleOne(parsed, ctx)));
}

/** A listening JSON-RPC endpoint. */
export interface RpcServer {
  readonly url: string;
  /** Websocket subscriptions, on the same port. */
  readonly wsUrl: string;
  close(): Promise<void>;
}

/** Serves the Solana JSON-RPC methods (HTTP) and subscriptions (websocket) on 127.0.0.1 (port 0: a free one). */
export async function startRpcServer(ctx: MethodContext, port = 0): Promise<RpcServer> {
  const server: Server = createServer((req, res) => {
    handleHttp(req, res, ctx).catch((err: unknown) => {
      if (!res.headersSent) {
        res.writeHead(500, { "content-type": "application/json" });
        res.end(stringifyRpc(errorReply(null, err)));
      }
    });
  });
  server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
  // Node requires the wait for a request's headers to outlast the keep-alive timeout, or an idle socket
  // whose next request is slow to arrive is cut by the headers timer instead.
  server.headersTimeout = KEEP_ALIVE_TIMEOUT_MS + 1_000;
  const subscriptions = attachSubscriptions(server, ctx);
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => resolve());
  });
  const { port: actual } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${actual}`,
    wsUrl: `ws://127.0.0.1:${actual}`,
    close: () =>
      new Promise<void>((resolve) => {
        subscriptions.close();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
