import { DrizzleQueryError } from "drizzle-orm/errors";
import type { LoggerOptions } from "pino";

/** Log fields that may hold a secret; pino writes `[Redacted]` in their place. */
export const REDACTED_LOG_PATHS = [
  "req.headers.authorization",
  "req.headers.cookie",
  "headers.authorization",
  "*.authorization",
  "password",
  "*.password",
  "key",
  "*.key",
  "accessToken",
  "*.accessToken",
  "deviceToken",
  "*.deviceToken",
  "privateKey",
  "*.privateKey",
];

/**
 * How the service logs, every logger of it: the level, the fields that may hold a secret (written
 * `[Redacted]`), and errors written by {@link loggedError}, also as the line's message when a call gives none
 * (pino would take the raw error's message).
 * @example const logger = pino(loggerOptions("info"), pino.destination(1));
 */
export function loggerOptions(level: string): LoggerOptions {
  return {
    level,
    redact: { paths: REDACTED_LOG_PATHS, censor: "[Redacted]" },
    serializers: { err: loggedError, req: loggedRequest },
    hooks: {
      logMethod(args, method) {
        const [first, second] = args as unknown[];
        if (typeof second !== "string") {
          if (isErrorLike(first)) return method.call(this, { err: first }, messageOf(first));
          if (typeof first === "object" && first !== null && "err" in first && isErrorLike(first.err))
            return method.call(this, first, messageOf(first.err));
        }
        return method.apply(this, args);
      },
    },
  };
}

/** The request fields the log reads (a fastify request's). */
interface RequestLike {
  method?: string;
  url?: string;
  host?: string;
  ip?: string;
  socket?: { remotePort?: number };
}

/**
 * A request as the log writes it (the fields fastify's own serializer writes), its query's values written
 * `[Redacted]` and anything in its path shaped like a credential too: no route takes a credential in its
 * URL, but a client that puts its key or token there (`?api_key=svc_…`, `/v1/svc_…`) must not have it
 * written down before it is refused.
 */
function loggedRequest(request: RequestLike): Record<string, unknown> {
  return {
    method: request.method,
    url: withoutCredentials(withoutQueryValues(request.url ?? "")),
    host: request.host,
    remoteAddress: request.ip,
    remotePort: request.socket?.remotePort,
  };
}

/** `/v1/x?a=1&b` as `/v1/x?a=[Redacted]&b`: the names stay, to show the request's shape. */
function withoutQueryValues(url: string): string {
  const start = url.indexOf("?");
  if (start < 0) return url;
  const names = url
    .slice(start + 1)
    .split("&")
    .map((pair) => (pair.includes("=") ? `${pair.slice(0, pair.indexOf("="))}=[Redacted]` : pair));
  return `${url.slice(0, start)}?${names.join("&")}`;
}

/**
 * What in a URL may be a credential: an API key (`svc_` and base62), a JWT (an access token: `eyJ…`, base64url
 * of `{"`, then a dot), a webhook secret (`whsec_…`). None of the service's ids can hold one (an id is a
 * prefix, `_` and base62 only).
 */
const CREDENTIAL_IN_URL = /svc_[A-Za-z0-9]+|eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_.-]*|whsec_[A-Za-z0-9+/=]+/g;

/**
 * `/v1/svc_Abc…` as `/v1/[Redacted]`, and the same in the query's names (`?svc_Abc…`): the rest as it was
 * sent. A URL that holds a credential once percent-decoded (`%73vc_…`, `%2Fsvc_…`) is written decoded, with
 * it redacted.
 */
function withoutCredentials(url: string): string {
  const redacted = url.replace(CREDENTIAL_IN_URL, "[Redacted]");
  let decoded: string;
  try {
    decoded = decodeURIComponent(redacted);
  } catch {
    return redacted; // not valid percent-encoding: what was sent is all there is
  }
  return decoded.search(CREDENTIAL_IN_URL) === -1
    ? redacted
    : decoded.replace(CREDENTIAL_IN_URL, "[Redacted]");
}

/** A database error's fields that say what failed without quoting a value. */
const DRIVER_FIELDS = ["code", "constraint", "table", "column", "schema", "severity", "routine"] as const;

/** How many errors of one chain (causes, aggregated errors) are written at most. */
const MAX_ERRORS = 20;

/**
 * An error as the log writes it: a plain object of its type, message, stack, own fields of plain values, and
 * the same of its cause and aggregated errors. A failed query (drizzle's error carries the statement's
 * parameters in its message: a key hash, a stored response) is written as its statement, its stack's frames
 * and its database error's fields, with none of the values; the database's message is left out too when
 * PostgreSQL quotes the value in it (class 22, a data exception). Nothing here throws: an error that cannot
 * be read is written as such.
 */
export function loggedError(error: unknown): unknown {
  try {
    return asLogged(error, new Set());
  } catch {
    return { type: "Error", message: "[an error the log could not read]" };
  }
}

function asLogged(error: unknown, seen: Set<object>): unknown {
  if (!isErrorLike(error)) return error;
  if (seen.has(error)) return { type: nameOf(error), message: "[written above: the chain loops]" };
  if (seen.size >= MAX_ERRORS) return { type: nameOf(error), message: "[more errors left out]" };
  seen.add(error);
  if (error instanceof DrizzleQueryError) {
    return {
      type: "DrizzleQueryError",
      message: "Failed query",
      query: String(error.query),
      stack: `DrizzleQueryError: Failed query${framesOf(error.stack)}`,
      ...(isErrorLike(error.cause) ? { cause: driverError(error.cause) } : {}),
    };
  }
  const written: Record<string, unknown> = { type: nameOf(error), message: error.message };
  for (const [key, value] of Object.entries(error)) {
    if (key === "message" || key === "stack" || key === "cause" || key === "errors") continue;
    if (isErrorLike(value)) written[key] = asLogged(value, seen);
    else if (isPlainValue(value)) written[key] = value;
  }
  if (typeof error.stack === "string") written.stack = error.stack;
  const cause: unknown = (error as { cause?: unknown }).cause;
  if (isErrorLike(cause)) written.cause = asLogged(cause, seen);
  else if (isPlainValue(cause)) written.cause = cause;
  const aggregated: unknown = (error as { errors?: unknown }).errors;
  if (Array.isArray(aggregated)) written.errors = aggregated.map((each) => asLogged(each, seen));
  return written;
}

/** The database's error under a failed query: what failed, without the values. */
function driverError(error: ErrorLike): Record<string, unknown> {
  const fields: Record<string, unknown> = { type: nameOf(error) };
  const source = error as ErrorLike & Partial<Record<(typeof DRIVER_FIELDS)[number], unknown>>;
  for (const field of DRIVER_FIELDS) {
    if (typeof source[field] === "string") fields[field] = source[field];
  }
  const quotesValue = typeof fields.code === "string" && fields.code.startsWith("22");
  fields.message = quotesValue ? "[a data exception: its message would quote the value]" : error.message;
  return fields;
}

type ErrorLike = { message: string; name?: unknown; stack?: unknown };

/** An Error, or what pino would write as one: an object with a string `message`. */
function isErrorLike(value: unknown): value is ErrorLike {
  return (
    value instanceof Error ||
    (typeof value === "object" && value !== null && typeof (value as ErrorLike).message === "string")
  );
}

/** A string, number or boolean: written as it is. */
function isPlainValue(value: unknown): value is string | number | boolean {
  return typeof value === "string" || typeof value === "number" || typeof value === "boolean";
}

function nameOf(error: ErrorLike): string {
  return typeof error.name === "string" ? error.name : "Error";
}

/** A stack's frames alone (`\n    at …`): its first lines repeat the message. */
function framesOf(stack: unknown): string {
  if (typeof stack !== "string") return "";
  const at = stack.indexOf("\n    at ");
  return at === -1 ? "" : stack.slice(at);
}

/** The message a log line takes from an error when its call gives none. */
function messageOf(error: ErrorLike): string {
  const written = loggedError(error);
  return typeof written === "object" && written !== null && "message" in written
    ? String(written.message)
    : "error";
}
