/**
 * The MCP server over streamable HTTP, for a service to mount (the Svc service serves it at `/mcp`). Each
 * request authenticates with its own `Authorization: Bearer <API key>`; the key is checked by calling the
 * service with it (through the SDK), so this module holds no credential of its own and no server code.
 */
import { createHash, randomBytes, randomUUID, timingSafeEqual } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { MAX_BATCH_SIZE } from "@modelcontextprotocol/sdk/server/requestBody.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import {
  isInitializeRequest,
  isJSONRPCErrorResponse,
  isJSONRPCRequest,
  isJSONRPCResultResponse,
  JSONRPCMessageSchema,
  type RequestId,
} from "@modelcontextprotocol/sdk/types.js";
import {
  type ServiceErrorBody,
  SvcError,
  SvcRateLimitError,
  SvcUnauthorizedError,
  SvcWallet,
} from "@svc/sdk";
import { credentialOf, servesTestNetworks, type ToolSet } from "./role.ts";
import { createSvcMcpServer } from "./server.ts";

/** Options of {@link createMcpHttpHandler}. */
export interface McpHttpOptions {
  /** The service's base URL (ending in `/v1`), or a function giving it (a service knows it once it listens). */
  baseUrl: string | (() => string);
  /** USD: a spend worth more asks the person first (MCP elicitation); undefined = never ask. */
  confirmAboveUsd?: string | undefined;
  /**
   * Open sessions kept at most. Full, the key holding the most sessions gives up its least recently used
   * one, so no key can close another's by opening many. Default 1000.
   */
  maxSessions?: number;
  /** Open sessions one API key keeps at most; beyond it, its own least recently used is closed. Default 10. */
  maxSessionsPerKey?: number;
  /** A session unused this long is closed when the next session opens. Default 30 minutes. */
  idleMs?: number;
  /** The clock, for idle sessions. */
  now?: () => number;
  /** The `fetch` the endpoint reaches the service with; default the global one. */
  fetch?: typeof fetch;
}

/**
 * A mounted MCP endpoint: `handle` each request; `close` at shutdown. A framework that has already read the
 * body passes its text (it is parsed only after the key is checked); otherwise the request stream is read.
 * A framework that names its requests sets `X-Request-Id` on the response before `handle`: the endpoint's
 * error bodies carry that id (without one, `handle` sets a new one).
 */
export interface McpHttpHandler {
  handle(request: IncomingMessage, response: ServerResponse, bodyText?: string): Promise<void>;
  close(): Promise<void>;
}

interface Session {
  transport: StreamableHTTPServerTransport;
  requests: InFlightRequests;
  keyDigest: Buffer;
  /** The account of the key: when the table is full, the account holding the most gives up a session. */
  accountId: string;
  lastUsed: number;
}

const digest = (key: string): Buffer => createHash("sha256").update(key).digest();

/** An error this endpoint answers itself, before or instead of the MCP transport. */
type McpHttpError = Omit<ServiceErrorBody["error"], "requestId" | "reason" | "details"> & {
  reason?: string | undefined;
  details?: Record<string, unknown> | undefined;
};

/**
 * The request's id: the `X-Request-Id` the mounting service already set on the response (the Svc service sets
 * its own request id there), or, mounted elsewhere, a new one set there now, so the header and the bodies agree.
 */
function requestIdOf(response: ServerResponse): string {
  const header = response.getHeader("x-request-id");
  if (typeof header === "string" && header !== "") return header;
  const id = `req_${randomBytes(12).toString("base64url")}`;
  if (!response.headersSent) response.setHeader("x-request-id", id);
  return id;
}

/**
 * Answers `{ error: { code, message, requestId, reason?, details? } }` (unless an answer has begun), with
 * `Retry-After` when given.
 */
function answerError(
  response: ServerResponse,
  status: number,
  requestId: string,
  error: McpHttpError,
  retryAfterSeconds?: number,
): void {
  if (response.headersSent) return;
  const body: ServiceErrorBody = {
    error: {
      code: error.code,
      message: error.message,
      requestId,
      ...(error.reason === undefined ? {} : { reason: error.reason }),
      ...(error.details === undefined ? {} : { details: error.details }),
    },
  };
  const headers: Record<string, string> = { "content-type": "application/json; charset=utf-8" };
  if (status === 401) headers["www-authenticate"] = 'Bearer realm="svc"';
  if (retryAfterSeconds !== undefined) headers["retry-after"] = String(retryAfterSeconds);
  response.writeHead(status, headers).end(JSON.stringify(body));
}

/** The most of a request body read when the mounting framework has not read it: the MCP transport's bound. */
const MAX_BODY_BYTES = 4 * 1024 * 1024;

/** The request's body as text, or undefined when it is longer than `maxBytes` (the rest is not read). */
async function readBody(request: IncomingMessage, maxBytes: number): Promise<string | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBytes) return undefined;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/** A POST refused for its JSON-RPC requests' ids: the HTTP status and the JSON-RPC error answering it. */
interface IdRefusal {
  status: number;
  /** The refused request's id; null for a batch (which of its requests the refusal answers is `data.id`). */
  id: RequestId | null;
  message: string;
  data?: { id: RequestId };
}

/**
 * Answers a refusal in JSON-RPC's shape (as the MCP transport answers a message it refuses, `-32600` Invalid
 * Request), unless an answer has begun. The HTTP status, not the id, ties the answer to the POST it refuses.
 */
function answerIdRefusal(response: ServerResponse, refusal: IdRefusal): void {
  if (response.headersSent) return;
  const error = { code: -32600, message: refusal.message, ...(refusal.data ? { data: refusal.data } : {}) };
  response
    .writeHead(refusal.status, { "content-type": "application/json; charset=utf-8" })
    .end(JSON.stringify({ jsonrpc: "2.0", id: refusal.id, error }));
}

/**
 * The JSON-RPC requests in flight in one session. `admit` a POST's body before its transport sees it: its
 * requests' ids are held until each is answered; `settled` once the transport has handled the POST.
 */
interface InFlightRequests {
  admit(body: unknown): { refused: IdRefusal } | { settled: () => void };
}

/** A POST's requests as held: their ids, those the transport took (it dispatched them), those not answered yet. */
interface HeldPost {
  ids: RequestId[];
  dispatched: Set<RequestId>;
  unanswered: Set<RequestId>;
}

/**
 * Keeps the ids of the requests in flight on a session's `transport` (call once the MCP server is connected to
 * it) unique. The transport files each request's answer under its id alone, for the whole session, and lets go
 * of a POST's ids only once every request in it is answered: a request naming an id in flight took over the
 * first one's answer (the first's answer went to the second's HTTP response, the second's was lost, and the
 * first response never ended), and a batch naming one id twice ended at its first answer. So a POST naming an
 * id in flight is refused (409), and a batch naming one twice (400), before the transport sees them: none of
 * their tools runs. A POST's ids are held from its admission until the transport lets go of them: when every
 * request it dispatched is answered, or once it handled the POST without dispatching any. A request the
 * client cancels is not answered (the SDK sends nothing): its id stays held, as the transport keeps it.
 * Ids compare as the transport's map compares them: 5 and "5" are two ids.
 */
function trackRequests(transport: StreamableHTTPServerTransport): InFlightRequests {
  const held = new Map<RequestId, HeldPost>();
  const release = (post: HeldPost): void => {
    for (const id of post.ids) if (held.get(id) === post) held.delete(id);
  };
  const deliver = transport.onmessage;
  transport.onmessage = (message, extra) => {
    if (isJSONRPCRequest(message)) held.get(message.id)?.dispatched.add(message.id);
    deliver?.(message, extra);
  };
  const send = transport.send.bind(transport);
  transport.send = async (message, options) => {
    try {
      await send(message, options);
    } finally {
      // After the transport's own bookkeeping: it has let go of the ids once its POST is fully answered.
      if ((isJSONRPCResultResponse(message) || isJSONRPCErrorResponse(message)) && message.id !== undefined) {
        const post = held.get(message.id);
        if (post?.unanswered.delete(message.id) && post.unanswered.size === 0) release(post);
      }
    }
  };
  return {
    admit: (body) => {
      const batch = Array.isArray(body);
      // A batch over the transport's bound is refused by it whole, unread: nothing to hold.
      if (batch && body.length > MAX_BATCH_SIZE) return { settled: () => {} };
      // The requests as the transport reads them: each message parsed, then told a request or not.
      const ids: RequestId[] = [];
      let twice: RequestId | undefined;
      for (const raw of batch ? body : [body]) {
        const parsed = JSONRPCMessageSchema.safeParse(raw);
        if (!parsed.success || !isJSONRPCRequest(parsed.data)) continue;
        if (twice === undefined && ids.includes(parsed.data.id)) twice = parsed.data.id;
        ids.push(parsed.data.id);
      }
      if (twice !== undefined) {
        return {
          refused: {
            status: 400,
            id: null,
            message: "Invalid Request: the batch has two requests with the same id",
            data: { id: twice },
          },
        };
      }
      const inFlight = ids.find((id) => held.has(id));
      if (inFlight !== undefined) {
        return {
          refused: {
            status: 409,
            id: batch ? null : inFlight,
            message: "Invalid Request: a request with this id is already in progress in this session",
            ...(batch ? { data: { id: inFlight } } : {}),
          },
        };
      }
      const post: HeldPost = { ids, dispatched: new Set(), unanswered: new Set(ids) };
      for (const id of ids) held.set(id, post);
      return {
        settled: () => {
          // A request the transport did not dispatch (it refused the POST) is never answered.
          for (const id of ids) if (!post.dispatched.has(id)) post.unanswered.delete(id);
          if (post.unanswered.size === 0) release(post);
        },
      };
    },
  };
}

/**
 * The request's credential, read as the service's `/v1` reads it: no `Authorization` header is
 * `missing_credentials`; one that is not `Bearer <credential>` is `invalid_credentials`.
 */
function bearerOf(request: IncomingMessage): { key: string } | { refused: McpHttpError } {
  const header = request.headers.authorization;
  if (!header) {
    return {
      refused: {
        code: "Unauthorized",
        message:
          "Missing credentials: the MCP endpoint needs an Svc API key, sent as Authorization: Bearer <key>",
        reason: "missing_credentials",
      },
    };
  }
  const match = /^Bearer[ ]+(\S+)\s*$/i.exec(header);
  if (match?.[1] === undefined) {
    return {
      refused: { code: "Unauthorized", message: "Invalid credentials", reason: "invalid_credentials" },
    };
  }
  return { key: match[1] };
}

/**
 * Builds the streamable HTTP endpoint. A request without a session starts one for its key's tool set (an
 * agent key is never offered a loosening tool); later requests name the session (`Mcp-Session-Id`) and must
 * carry the same key. No key or a key the service refuses → 401 with the service's reason and message. Every
 * error answered here has the service's shape, {@link ServiceErrorBody}, with the request's id, but for a
 * JSON-RPC request naming an id already in flight in its session (409) or a batch naming one id twice (400),
 * refused in JSON-RPC's shape before any of it runs; a fault answers 500 and is rethrown (for the mounting
 * service to log).
 * @example
 * const mcp = createMcpHttpHandler({ baseUrl: "http://127.0.0.1:8080/v1" });
 * http.createServer((req, res) => void mcp.handle(req, res).catch((error) => console.error(error)));
 */
export function createMcpHttpHandler(options: McpHttpOptions): McpHttpHandler {
  const sessions = new Map<string, Session>();
  const maxSessions = options.maxSessions ?? 1000;
  const maxSessionsPerKey = options.maxSessionsPerKey ?? 10;
  const idleMs = options.idleMs ?? 30 * 60_000;
  const now = options.now ?? Date.now;
  const baseUrl = (): string => (typeof options.baseUrl === "function" ? options.baseUrl() : options.baseUrl);

  const closeSession = async (id: string): Promise<void> => {
    const session = sessions.get(id);
    sessions.delete(id);
    await session?.transport.close();
  };

  /** Session ids by what `group` names for each session, each group's least recently used first. */
  const sessionsBy = (group: (session: Session) => string, among = sessions): Map<string, string[]> => {
    const grouped = new Map<string, string[]>();
    const oldestFirst = [...among].sort(([, a], [, b]) => a.lastUsed - b.lastUsed);
    for (const [id, session] of oldestFirst) {
      const name = group(session);
      grouped.set(name, [...(grouped.get(name) ?? []), id]);
    }
    return grouped;
  };
  const byKey = (session: Session) => session.keyDigest.toString("hex");

  /** The largest group (the opener's own first on a tie), or undefined when there is none. */
  const largest = (grouped: Map<string, string[]>, opener: string): string | undefined => {
    let chosen: string | undefined = grouped.has(opener) ? opener : undefined;
    for (const [name, ids] of grouped)
      if (chosen === undefined || ids.length > (grouped.get(chosen)?.length ?? 0)) chosen = name;
    return chosen;
  };

  /**
   * Before `keyDigest` (of `accountId`) opens a session: closes idle sessions, then the key's own least
   * recently used ones beyond its bound, then, while the table is full, one of the account holding the most
   * (the opener's own first on a tie): its key holding the most's least recently used. So neither a key
   * opening many, nor an account's many keys, close another account's sessions.
   */
  const makeRoom = async (keyDigest: Buffer, accountId: string): Promise<void> => {
    const cutoff = now() - idleMs;
    for (const [id, session] of sessions) if (session.lastUsed < cutoff) await closeSession(id);
    const opener = keyDigest.toString("hex");
    const own = sessionsBy(byKey).get(opener) ?? [];
    while (own.length >= maxSessionsPerKey) await closeSession(own.shift() as string);
    while (sessions.size >= maxSessions) {
      const account = largest(
        sessionsBy((session) => session.accountId),
        accountId,
      );
      const ofAccount = new Map([...sessions].filter(([, session]) => session.accountId === account));
      const keys = sessionsBy(byKey, ofAccount);
      const oldest = keys.get(largest(keys, opener) ?? "")?.[0];
      if (oldest === undefined) break;
      await closeSession(oldest);
    }
  };

  /** Hands the request to the session's transport, unless its JSON-RPC requests' ids are refused. */
  const handleAdmitted = async (
    transport: StreamableHTTPServerTransport,
    requests: InFlightRequests,
    request: IncomingMessage,
    response: ServerResponse,
    parsedBody: unknown,
  ): Promise<void> => {
    const admitted = requests.admit(parsedBody);
    if ("refused" in admitted) {
      answerIdRefusal(response, admitted.refused);
      return;
    }
    try {
      await transport.handleRequest(request, response, parsedBody);
    } finally {
      admitted.settled();
    }
  };

  /** Serves one request; every error answered here has the service's shape, with the request's id. */
  const serve = async (
    request: IncomingMessage,
    response: ServerResponse,
    requestId: string,
    bodyText: string | undefined,
  ): Promise<void> => {
    const credential = bearerOf(request);
    if ("refused" in credential) {
      answerError(response, 401, requestId, credential.refused);
      return;
    }
    const apiKey = credential.key;
    // A limit is answered at once, to the key check and to a tool alike, rather than waited out (up to a
    // minute) inside this request; other failures are retried as the SDK does (a spend with its key, so a
    // lost answer is replayed, never paid twice).
    const svc = new SvcWallet({
      apiKey,
      baseUrl: baseUrl(),
      retryRateLimited: false,
      ...(options.fetch ? { fetch: options.fetch } : {}),
    });
    const sessionId = request.headers["mcp-session-id"];
    let toolSet: ToolSet | undefined;
    let accountId = "";
    let faucet = true;
    try {
      // Every request proves its key with the service; a new session also learns the key's role.
      if (typeof sessionId === "string") await svc.auth.me();
      else {
        ({ toolSet, accountId } = await credentialOf(svc));
        faucet = await servesTestNetworks(svc);
      }
    } catch (error) {
      if (error instanceof SvcUnauthorizedError) {
        // The service's refusal (its code, reason and message), under this request's id.
        answerError(response, 401, requestId, {
          code: error.code,
          message: error.message,
          reason: error.reason,
          details: error.details,
        });
        return;
      }
      if (error instanceof SvcRateLimitError) {
        // Over a limit, the key's or its client's address's (the service's answer, as /v1 gives it): the caller
        // waits, not this request.
        answerError(
          response,
          429,
          requestId,
          { code: error.code, message: error.message, reason: error.reason, details: error.details },
          error.retryAfter,
        );
        return;
      }
      if (error instanceof SvcError) {
        answerError(response, 502, requestId, {
          code: "InternalError",
          message: `The service could not check the key: ${error.message}`,
          reason: "service_unavailable",
        });
        return;
      }
      throw error;
    }

    let parsedBody: unknown;
    if (request.method === "POST") {
      // Read here when the mounting framework has not: its requests' ids are checked before the transport's turn.
      const text = bodyText ?? (await readBody(request, MAX_BODY_BYTES));
      if (text === undefined) {
        answerError(response, 413, requestId, {
          code: "ValidationError",
          message: `Request body exceeds ${MAX_BODY_BYTES} bytes`,
          reason: "body_too_large",
        });
        return;
      }
      try {
        parsedBody = JSON.parse(text);
      } catch {
        // As `/v1` answers a body that is not JSON (without echoing the body).
        answerError(response, 400, requestId, {
          code: "ValidationError",
          message: "Malformed request body: not valid JSON",
          reason: "invalid_body",
        });
        return;
      }
    }

    if (typeof sessionId === "string") {
      const session = sessions.get(sessionId);
      if (session === undefined) {
        answerError(response, 404, requestId, {
          code: "NotFound",
          message: "No such MCP session (it ended or expired): initialize a new one",
          reason: "session_not_found",
        });
        return;
      }
      if (!timingSafeEqual(session.keyDigest, digest(apiKey))) {
        answerError(response, 403, requestId, {
          code: "Forbidden",
          message: "This MCP session was opened with another API key",
          reason: "session_of_another_key",
        });
        return;
      }
      session.lastUsed = now();
      await handleAdmitted(session.transport, session.requests, request, response, parsedBody);
      return;
    }

    // Only an initialize request opens a session: anything else without one is refused before room is made
    // for it (which closed the key's oldest session for a session never opened).
    const messages = Array.isArray(parsedBody) ? parsedBody : [parsedBody];
    if (request.method !== "POST" || !messages.some((message) => isInitializeRequest(message))) {
      answerError(response, 400, requestId, {
        code: "ValidationError",
        message:
          "No MCP session named: POST an initialize request first, then send the Mcp-Session-Id header its answer gives with every request",
        reason: "session_required",
      });
      return;
    }
    const keyDigest = digest(apiKey);
    await makeRoom(keyDigest, accountId);
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        sessions.set(id, { transport, requests, keyDigest, accountId, lastUsed: now() });
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
    const requests = trackRequests(transport);
    await handleAdmitted(transport, requests, request, response, parsedBody);
  };

  const handle = async (request: IncomingMessage, response: ServerResponse, bodyText?: string) => {
    const requestId = requestIdOf(response);
    try {
      await serve(request, response, requestId, bodyText);
    } catch (error) {
      // A fault of ours (or of the configuration): the caller gets an answer naming the request, and the
      // error is rethrown for the mounting service to log under the same id.
      answerError(response, 500, requestId, {
        code: "InternalError",
        message: "Internal error; the request id locates it in the log",
      });
      if (!response.writableEnded) response.end();
      throw error;
    }
  };

  return {
    handle,
    close: async () => {
      for (const id of [...sessions.keys()]) await closeSession(id);
    },
  };
}
