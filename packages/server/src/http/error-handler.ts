import { STATUS_CODES } from "node:http";
import type { Socket } from "node:net";
import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import { hasZodFastifySchemaValidationErrors } from "fastify-type-provider-zod";
import { newId } from "../internal/crypto.ts";
import { AppError, errors } from "../internal/errors.ts";
import type { App } from "./types.ts";

/** The JSON shape of every error response. */
export interface ErrorBody {
  error: {
    code: string;
    message: string;
    requestId: string;
    reason?: string;
    details?: Record<string, unknown>;
  };
}

/**
 * The headers of every answer of the service (the console's and the docs' files set their own caching over
 * them): no cache, the browser's or one between, keeps an answer. Answers are one credential's, of the
 * moment, and some carry a secret shown once (a login's access token, a new API key, a webhook endpoint's
 * signing secret). Nothing is read as another type than the one declared.
 */
export function apiAnswerHeaders(reply: FastifyReply): FastifyReply {
  return reply.headers(API_ANSWER_HEADERS);
}

const API_ANSWER_HEADERS = { "cache-control": "no-store", "x-content-type-options": "nosniff" } as const;

function errorBody(error: AppError, requestId: string): ErrorBody {
  return {
    error: {
      code: error.code,
      message: error.message,
      requestId,
      ...(error.reason ? { reason: error.reason } : {}),
      ...(error.details ? { details: error.details } : {}),
    },
  };
}

function render(request: FastifyRequest, reply: FastifyReply, error: AppError): FastifyReply {
  const body = errorBody(error, request.id);
  // Set here as well as in onRequest: errors raised by the router arrive before any hook has run.
  apiAnswerHeaders(reply.header("x-request-id", request.id));
  if (error.status === 429) {
    const seconds = Number(error.details?.retryAfterSeconds ?? 1);
    reply.header("retry-after", String(seconds));
  }
  return reply.status(error.status).type("application/json; charset=utf-8").send(body);
}

const LOCATION_REASON = {
  body: errors.invalidBody,
  querystring: errors.invalidQuery,
  params: errors.invalidParams,
  headers: errors.invalidHeader,
} as const;

/** Turns whatever was thrown into one of the errors on the list. */
function toAppError(error: unknown, request: FastifyRequest): AppError {
  if (error instanceof AppError) return error;
  if (hasZodFastifySchemaValidationErrors(error)) {
    const context = (error as FastifyError).validationContext ?? "body";
    const issues = error.validation.map((issue) => ({
      path: issue.instancePath.replace(/^\//, "").replaceAll("/", ".") || "(root)",
      message: issue.message ?? "invalid",
    }));
    const first = issues[0];
    const where = context === "querystring" ? "query" : context;
    const message = first ? `Invalid ${where}: ${first.path}: ${first.message}` : `Invalid ${where}`;
    const factory = LOCATION_REASON[context as keyof typeof LOCATION_REASON] ?? errors.invalidBody;
    return factory(message, { issues });
  }
  const fastifyError = error as Partial<FastifyError>;
  switch (fastifyError.code) {
    case "FST_ERR_CTP_INVALID_JSON_BODY":
    case "FST_ERR_CTP_INVALID_CONTENT_LENGTH":
      return errors.invalidBody(`Malformed request body: ${fastifyError.message ?? "not valid JSON"}`);
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return errors.bodyTooLarge(BODY_LIMIT_BYTES);
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
    case "FST_ERR_CTP_INVALID_TYPE":
      return errors.unsupportedMediaType(request.headers["content-type"] ?? "");
    case "FST_ERR_BAD_URL":
    case "FST_ERR_MAX_PARAM_LENGTH":
      return errors.invalidParams("Malformed or oversized path parameter");
    case "FST_ERR_VALIDATION":
      return errors.invalidBody(fastifyError.message ?? "Invalid request");
  }
  // A static file route (the docs' assets) refuses a path out of its directory, or not in its one spelling
  // (`..`, `//`, `.` segments sent as they are): that is no file it serves, as a name out of the console's
  // build is not (a 403 Forbidden had no case here and was a 500, logged as an error, for anyone).
  if (fastifyError.code === "FST_STATIC_FORBIDDEN_PATH")
    return errors.routeNotFound(request.method, request.url);
  // The static files' sender answers an unmet Range or precondition with an error of that status.
  if (fastifyError.statusCode === 412 || fastifyError.statusCode === 416) {
    return errors.fileConditionUnmet(fastifyError.statusCode);
  }
  // Body parser errors for malformed JSON arrive as SyntaxError with a 400 status.
  if (error instanceof SyntaxError || fastifyError.statusCode === 400) {
    return errors.invalidBody(`Malformed request: ${fastifyError.message ?? "bad request"}`);
  }
  return errors.internal(error);
}

/** Largest request body accepted, in bytes. */
export const BODY_LIMIT_BYTES = 64 * 1024;

/** Renders an error that the router raised before routing (bad URL encoding, oversized parameter). */
export function renderFrameworkError(
  error: unknown,
  request: FastifyRequest,
  reply: FastifyReply,
): FastifyReply {
  return render(request, reply, toAppError(error, request));
}

/**
 * Answers what Node's HTTP parser refused before Fastify saw a request (a malformed request line or header,
 * headers over Node's limit, a request not all arrived in time), in the API's error shape with a request id,
 * and closes the connection: the rest of its bytes cannot be trusted to start a request. Behind a response
 * already under way on the connection, nothing is written: the connection just closes.
 */
export function answerClientError(error: Error & { code?: string }, socket: Socket): void {
  // A connection reset left nothing to answer.
  if (error.code === "ECONNRESET" || socket.destroyed) return;
  const appError =
    error.code === "ERR_HTTP_REQUEST_TIMEOUT"
      ? errors.requestTimeout()
      : error.code === "HPE_HEADER_OVERFLOW"
        ? errors.headersTooLarge()
        : errors.malformedRequest();
  const requestId = newId("req");
  const body = JSON.stringify(errorBody(appError, requestId));
  // A response already under way on this connection (a stream, say /mcp's, and then bytes that are no
  // request) has begun its body: an answer written now would land inside it. Node answers only when none
  // has begun (its `_httpMessage`, the response the socket is writing, as Node's own handler reads it).
  const answering = (socket as Socket & { _httpMessage?: { headersSent?: boolean } | null })._httpMessage;
  if (socket.writable && !answering?.headersSent) {
    socket.write(
      `HTTP/1.1 ${appError.status} ${STATUS_CODES[appError.status]}\r\n` +
        "Content-Type: application/json; charset=utf-8\r\n" +
        `Content-Length: ${Buffer.byteLength(body)}\r\n` +
        `x-request-id: ${requestId}\r\n` +
        Object.entries(API_ANSWER_HEADERS)
          .map(([name, value]) => `${name}: ${value}\r\n`)
          .join("") +
        "Connection: close\r\n\r\n" +
        body,
    );
  }
  socket.destroy();
}

/** Installs the one error handler and the unknown-route handler. */
export function installErrorHandling(app: App): void {
  app.setErrorHandler((error, request, reply) => {
    const appError = toAppError(error, request);
    if (appError.status >= 500) {
      // A fault of ours or of our store (500, 503) is an error. A failure of what the request reached out to
      // (502: a chain's node, the resource an x402 fetch named, the daemon) is a warning: any caller can cause
      // one, and it must not fill the error log an operator is paged from.
      const level = appError.status === 502 ? "warn" : "error";
      request.log[level](
        { err: appError.cause ?? error, requestId: request.id, reason: appError.reason },
        "request failed",
      );
    }
    return render(request, reply, appError);
  });
  app.setNotFoundHandler((request, reply) =>
    render(request, reply, errors.routeNotFound(request.method, request.url)),
  );
}
