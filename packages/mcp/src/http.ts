/**
 * The MCP server over streamable HTTP, for a service to mount (the Svc service serves it at `/mcp`). Each
 * request authenticates with its own `Authorization: Bearer <API key>`; the key is checked by calling the
 * service with it (through the SDK), so this module holds no credential of its own and no server code.
 */
import { createHash, randomUUID, timingSafeEqual } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { SvcError, SvcUnauthorizedError, SvcWallet } from "@svc/sdk";
import { servesTestNetworks, toolSetOf } from "./role.ts";
import { createSvcMcpServer } from "./server.ts";

/** Options of {@link createMcpHttpHandler}. */
export interface McpHttpOptions {
  /** The service's base URL (ending in `/v1`), or a function giving it (a service knows it once it listens). */
  baseUrl: string | (() => string);
  /** USD: a spend worth more asks the person first (MCP elicitation); undefined = never ask. */
  confirmAboveUsd?: string | undefined;
  /** Open sessions kept at most; the least recently used is closed beyond it. Default 1000. */
  maxSessions?: number;
  /** A session unused this long is closed when the next session opens. Default 30 minutes. */
  idleMs?: number;
  /** The clock, for idle sessions. */
  now?: () => number;
}

/**
 * A mounted MCP endpoint: `handle` each request; `close` at shutdown. A framework that has already read the
 * body passes its text (it is parsed only after the key is checked); otherwise the request stream is read.
 */
export interface McpHttpHandler {
  handle(request: IncomingMessage, response: ServerResponse, bodyText?: string): Promise<void>;
  close(): Promise<void>;
}

interface Session {
  transport: StreamableHTTPServerTransport;
  keyDigest: Buffer;
  lastUsed: number;
}

const digest = (key: string): Buffer => createHash("sha256").update(key).digest();

function answerError(
  response: ServerResponse,
  status: number,
  error: { code: string; message: string; reason?: string | undefined; requestId?: string | undefined },
): void {
  if (response.headersSent) return;
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (status === 401) headers["www-authenticate"] = 'Bearer realm="svc"';
  response.writeHead(status, headers).end(JSON.stringify({ error }));
}

function bearerOf(request: IncomingMessage): string | undefined {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? "");
  return match?.[1];
}

/**
 * Builds the streamable HTTP endpoint. A request without a session starts one for its key's tool set (an
 * agent key is never offered a loosening tool); later requests name the session (`Mcp-Session-Id`) and must
 * carry the same key. No key or a key the service refuses → 401 with the service's message.
 * @example
 * const mcp = createMcpHttpHandler({ baseUrl: "http://127.0.0.1:8080/v1" });
 * http.createServer((req, res) => mcp.handle(req, res));
 */
export function createMcpHttpHandler(options: McpHttpOptions): McpHttpHandler {
  const sessions = new Map<string, Session>();
  const maxSessions = options.maxSessions ?? 1000;
  const idleMs = options.idleMs ?? 30 * 60_000;
  const now = options.now ?? Date.now;
  const baseUrl = (): string => (typeof options.baseUrl === "function" ? options.baseUrl() : options.baseUrl);

  const closeSession = async (id: string): Promise<void> => {
    const session = sessions.get(id);
    sessions.delete(id);
    await session?.transport.close();
  };

  /** Closes idle sessions, and the least recently used ones beyond the bound, before a new one opens. */
  const makeRoom = async (): Promise<void> => {
    const cutoff = now() - idleMs;
    for (const [id, session] of sessions) if (session.lastUsed < cutoff) await closeSession(id);
    while (sessions.size >= maxSessions) {
      const oldest = [...sessions].sort(([, a], [, b]) => a.lastUsed - b.lastUsed)[0];
      if (oldest === undefined) break;
      await closeSession(oldest[0]);
    }
  };

  const handle = async (request: IncomingMessage, response: ServerResponse, bodyText?: string) => {
    const apiKey = bearerOf(request);
    if (apiKey === undefined) {
      answerError(response, 401, {
        code: "Unauthorized",
        reason: "missing_credential",
        message: "The MCP endpoint needs an Svc API key: send Authorization: Bearer <key>",
      });
      return;
    }
    const svc = new SvcWallet({ apiKey, baseUrl: baseUrl() });
    const sessionId = request.headers["mcp-session-id"];
    let toolSet: Awaited<ReturnType<typeof toolSetOf>> | undefined;
    let faucet = true;
    try {
      // Every request proves its key with the service; a new session also learns the key's role.
      if (typeof sessionId === "string") await svc.auth.me();
      else {
        toolSet = await toolSetOf(svc);
        faucet = await servesTestNetworks(svc);
      }
    } catch (error) {
      if (error instanceof SvcUnauthorizedError) {
        answerError(response, 401, {
          code: error.code,
          message: error.message,
          reason: error.reason,
          requestId: error.requestId,
        });
        return;
      }
      if (error instanceof SvcError) {
        answerError(response, 502, {
          code: "InternalError",
          reason: "service_unavailable",
          message: `The service could not check the key: ${error.message}`,
        });
        return;
      }
      throw error;
    }

    let parsedBody: unknown;
    if (bodyText !== undefined && request.method === "POST") {
      try {
        parsedBody = JSON.parse(bodyText);
      } catch {
        if (!response.headersSent) {
          response.writeHead(400, { "content-type": "application/json" }).end(
            JSON.stringify({
              jsonrpc: "2.0",
              error: { code: -32700, message: "Parse error: the body is not JSON" },
              id: null,
            }),
          );
        }
        return;
      }
    }

    if (typeof sessionId === "string") {
      const session = sessions.get(sessionId);
      if (session === undefined) {
        answerError(response, 404, {
          code: "NotFound",
          reason: "session_not_found",
          message: "No such MCP session (it ended or expired): initialize a new one",
        });
        return;
      }
      if (!timingSafeEqual(session.keyDigest, digest(apiKey))) {
        answerError(response, 403, {
          code: "Forbidden",
          reason: "session_of_another_key",
          message: "This MCP session was opened with another API key",
        });
        return;
      }
      session.lastUsed = now();
      await session.transport.handleRequest(request, response, parsedBody);
      return;
    }

    await makeRoom();
    const keyDigest = digest(apiKey);
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        sessions.set(id, { transport, keyDigest, lastUsed: now() });
      },
    });
    transport.onclose = () => {
      if (transport.sessionId !== undefined) sessions.delete(transport.sessionId);
    };
    const server = createSvcMcpServer({
      svc,
      toolSet: toolSet ?? "read",
      faucet,
      confirmAboveUsd: options.confirmAboveUsd,
    });
    await server.connect(transport);
    await transport.handleRequest(request, response, parsedBody);
  };

  return {
    handle,
    close: async () => {
      for (const id of [...sessions.keys()]) await closeSession(id);
    },
  };
}
