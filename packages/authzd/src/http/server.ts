import http, { type IncomingMessage, type ServerResponse } from "node:http";
import type { AuthzService } from "../authz/service.ts";
import { errors, HttpError } from "../internal/errors.ts";
import { tokenSha256 } from "../internal/tokens.ts";
import { routes } from "./routes/index.ts";
import type { Caller, RequestContext, Route } from "./types.ts";

/** Largest accepted request body; spend bodies are a few hundred bytes. */
export const MAX_BODY_BYTES = 16 * 1024;

const utf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * Builds the daemon's HTTP server on node:http (no framework: the hot path is one route, and every
 * microsecond here is throughput).
 *
 * @example
 * const server = createHttpServer(service, operatorTokenSha256);
 * server.listen(8421, "127.0.0.1");
 */
export function createHttpServer(service: AuthzService, operatorTokenSha256: string): http.Server {
  const byPath = new Map<string, Route[]>();
  const byPrefix: [string, Route[]][] = [];
  for (const route of routes) {
    if (route.path.endsWith("/:name")) {
      const prefix = route.path.slice(0, -":name".length);
      const entry = byPrefix.find(([p]) => p === prefix);
      if (entry === undefined) byPrefix.push([prefix, [route]]);
      else entry[1].push(route);
    } else {
      byPath.set(route.path, [...(byPath.get(route.path) ?? []), route]);
    }
  }

  const match = (method: string, path: string): Route => {
    let candidates = byPath.get(path);
    if (candidates === undefined) {
      const entry = byPrefix.find(([prefix]) => path.startsWith(prefix) && path.length > prefix.length);
      if (entry !== undefined && !path.slice(entry[0].length).includes("/")) candidates = entry[1];
    }
    if (candidates === undefined) throw errors.routeNotFound(method, path);
    const route = candidates.find((candidate) => candidate.method === method);
    if (route === undefined) throw errors.methodNotAllowed(method, path);
    return route;
  };

  const authenticate = (header: string | undefined): Caller | null => {
    // The scheme's name is case-insensitive (RFC 9110): `bearer` is `Bearer`.
    const token = header === undefined ? undefined : /^Bearer +(\S+)\s*$/i.exec(header)?.[1];
    if (token === undefined) return null;
    const sha256 = tokenSha256(token);
    if (sha256 === operatorTokenSha256) return { kind: "operator" };
    const identity = service.identityForTokenSha256(sha256);
    return identity === undefined ? null : { kind: "identity", identity };
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = req.url ?? "/";
    const q = url.indexOf("?");
    const path = q === -1 ? url : url.slice(0, q);
    const route = match(req.method ?? "GET", path);
    let caller: Caller | null = null;
    if (route.auth !== "none") {
      caller = authenticate(req.headers.authorization);
      if (caller === null) throw errors.unauthorized();
      if (route.auth === "operator" && caller.kind !== "operator") throw errors.operatorRequired();
      if (route.auth === "identity" && caller.kind !== "identity") {
        throw errors.forbidden("spend endpoints need an identity token; the operator token only administers");
      }
    }
    const body = req.method === "POST" ? await readBody(req) : null;
    const ctx: RequestContext = {
      req,
      path,
      query: new URLSearchParams(q === -1 ? "" : url.slice(q + 1)),
      caller,
      service,
      json: () => parseJson(req, body),
    };
    const reply = await route.handle(ctx);
    if (reply.body instanceof Promise) throw new Error(`${route.path} replied with an unawaited promise`);
    send(res, reply.status, reply.body);
  };

  return http.createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      // The client went away before its body arrived: nobody to answer, and no fault of the daemon's.
      if (error instanceof ClientGone) {
        res.destroy();
        return;
      }
      if (error instanceof HttpError) {
        send(
          res,
          error.status,
          { error: error.message, code: error.code, ...error.extra },
          error.status === 413,
          error.headers,
        );
        return;
      }
      console.error(`authzd: unexpected error on ${req.method} ${req.url?.split("?")[0]}:`, error);
      const internal = errors.internal();
      send(res, internal.status, { error: internal.message, code: internal.code });
    });
  });
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers["content-length"] ?? 0);
    if (declared > MAX_BODY_BYTES) {
      reject(errors.bodyTooLarge(MAX_BODY_BYTES));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        req.off("data", onData);
        req.resume();
        reject(errors.bodyTooLarge(MAX_BODY_BYTES));
        return;
      }
      chunks.push(chunk);
    };
    req.on("data", onData);
    req.on("end", () => resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks)));
    req.on("error", (error) => reject(new ClientGone(error)));
  });
}

function parseJson(req: IncomingMessage, body: Buffer | null): unknown {
  const mediaType = (req.headers["content-type"] ?? "").split(";")[0]?.trim().toLowerCase();
  if (mediaType !== "application/json") throw errors.unsupportedMediaType();
  if (body === null || body.length === 0) throw errors.invalidJson("the body is empty");
  let text: string;
  try {
    text = utf8.decode(body);
  } catch {
    throw errors.invalidJson("the body is not UTF-8");
  }
  try {
    return JSON.parse(text);
  } catch {
    // The parser's message quotes the body; the body is not echoed back.
    throw errors.invalidJson("syntax error");
  }
}

function send(
  res: ServerResponse,
  status: number,
  body: unknown,
  close = false,
  headers: Readonly<Record<string, string>> = {},
): void {
  if (res.headersSent) return;
  const text = JSON.stringify(body);
  res.writeHead(status, {
    "content-type": "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(text),
    ...(close ? { connection: "close" } : {}),
    ...headers,
  });
  res.end(text);
}

/** The request's connection failed or was closed while its body was being read. */
class ClientGone extends Error {
  constructor(cause: unknown) {
    super("the client went away before its request body arrived", { cause });
  }
}
