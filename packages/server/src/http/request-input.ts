import type { FastifyRequest } from "fastify";
import { z } from "zod";
import { errors } from "../internal/errors.ts";
import { InexactNumber, markInexactNumbers, restoreInexactNumbers } from "../internal/exact-json.ts";
import type { App } from "./types.ts";

// NUL, or a UTF-16 surrogate without its partner: neither can be stored as text (PostgreSQL refuses NUL in
// text and a lone surrogate has no UTF-8 encoding), nor shown back faithfully.
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const unstorable = (text: string) => text.includes("\u0000") || LONE_SURROGATE.test(text);

/**
 * The path (`a.b.0`) of the first string, key or value, holding an unstorable character; undefined if none.
 * Bodies nest at most {@link MAX_BODY_DEPTH} deep, the other parts of a request not at all.
 */
function findUnstorable(value: unknown, path: string): string | undefined {
  if (typeof value === "string") return unstorable(value) ? path || "(root)" : undefined;
  if (value === null || typeof value !== "object") return undefined;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = findUnstorable(value[i], path ? `${path}.${i}` : String(i));
      if (found) return found;
    }
    return undefined;
  }
  // Its text is a number token; every other object (the query's has no Object prototype) is walked.
  if (value instanceof InexactNumber) return undefined;
  for (const [key, child] of Object.entries(value)) {
    const childPath = path ? `${path}.${key}` : key;
    if (unstorable(key)) return `${path ? `${path}.` : ""}(a key)`;
    const found = findUnstorable(child, childPath);
    if (found) return found;
  }
  return undefined;
}

const MESSAGE = "contains a NUL character or an unpaired UTF-16 surrogate";

/** Why JSON that parses is refused by fastify's parser: it guards against prototype pollution. */
const PROTOTYPE_KEY =
  "Invalid body: a key named __proto__, or constructor holding prototype, is not accepted";

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/** A route of the API that declares no body (the ones that act on what their path names). */
function takesNoBody(request: FastifyRequest): boolean {
  return (
    request.routeOptions.url?.startsWith("/v1/") === true && request.routeOptions.schema?.body === undefined
  );
}

/** No body at all, or one that says nothing: `{}`. */
function isNoBody(body: unknown): boolean {
  return (
    body === undefined ||
    (typeof body === "object" && body !== null && !Array.isArray(body) && Object.keys(body).length === 0)
  );
}

/** Refuses, with 400 before any route runs, a request whose strings could not be stored or shown back. */
function checkStorable(request: FastifyRequest): void {
  const where = [
    ["params", request.params, errors.invalidParams],
    ["query", request.query, errors.invalidQuery],
    ["headers", request.headers, errors.invalidHeader],
    ["body", request.body, errors.invalidBody],
  ] as const;
  for (const [location, value, factory] of where) {
    const path = findUnstorable(value, "");
    if (path) {
      // The path names a field (or "a key"), never the offending text: it may be a secret (a password).
      throw factory(`Invalid ${location}: ${path}: ${MESSAGE}`, { issues: [{ path, message: MESSAGE }] });
    }
  }
}

/**
 * How deep a request body's objects and arrays may nest (the body itself is level 1). No route needs more;
 * every walk of a body (validation, the Idempotency-Key's fingerprint, a payment's request body) is then
 * bounded, where thousands of levels in a few kilobytes overflowed the stack (500).
 */
export const MAX_BODY_DEPTH = 64;

/**
 * What makes JSON text ambiguous or too deep to take, found in one pass before it is parsed: objects and
 * arrays nested deeper than `max` (brackets inside strings do not count), or a key twice in one object
 * (`{"amount":"1","amount":"2"}`: a parser keeps the last, the client may have meant either). Undefined when
 * neither; text that is not JSON is left for the parser to refuse.
 */
function structureProblem(text: string, max: number): string | undefined {
  // Per open object the keys seen so far; null for an array.
  const open: (Set<string> | null)[] = [];
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      const start = i;
      i++;
      while (i < text.length && text.charCodeAt(i) !== 0x22) i += text.charCodeAt(i) === 0x5c /* \ */ ? 2 : 1;
      const keys = open.at(-1);
      if (!keys) continue;
      let next = i + 1;
      while (next < text.length && /\s/.test(text.charAt(next))) next++;
      if (text.charAt(next) !== ":") continue;
      let key: string;
      try {
        key = JSON.parse(text.slice(start, i + 1)) as string;
      } catch {
        return undefined;
      }
      // Cut by characters, not UTF-16 units: a cut pair would be an unpaired surrogate in the message.
      if (keys.has(key))
        return `the key ${JSON.stringify(Array.from(key).slice(0, 64).join(""))} appears twice in one object`;
      keys.add(key);
    } else if (c === 0x5b /* [ */ || c === 0x7b /* { */) {
      if (open.length >= max) return `nested deeper than ${max} levels`;
      open.push(c === 0x7b ? new Set() : null);
    } else if (c === 0x5d /* ] */ || c === 0x7d /* } */) open.pop();
  }
  return undefined;
}

/**
 * Installs the body parsers and the check that refuses NUL and lone surrogates in every string a route could
 * receive, at any depth.
 * - `application/json` bodies keep inexact numbers recognisable ({@link markInexactNumbers}), nest at most
 *   {@link MAX_BODY_DEPTH} deep, hold no key twice in one object, and no `__proto__` key (nor
 *   `constructor.prototype`).
 * - An empty body is no body, whatever its Content-Type: clients send `Content-Type: application/json` by
 *   default, even on `POST …/policy/pause` or `DELETE`. A route that takes a body then answers its usual
 *   validation error, one that takes none proceeds.
 * - A route of the API that takes no body refuses one, 400 `invalid_body`, but for `{}`: a field sent there
 *   (`{"status":"active"}` to a pause) would be ignored while its client believed it understood.
 * - A body of any other media type (`text/plain`, forms) is 415, on every route.
 * - A route of the API (`/v1/…`) that declares no query takes none: any query parameter is 400
 *   `invalid_query`, as an unknown one is where a route declares its query.
 */
export function installInputChecks(app: App): void {
  app.addHook("onRoute", (route) => {
    if (route.url.startsWith("/v1/") && route.schema?.querystring === undefined)
      route.schema = { ...route.schema, querystring: z.strictObject({}) };
  });
  const defaultJson = app.getDefaultJsonParser("error", "error");
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("application/json", { parseAs: "string" }, (request, body, done) => {
    const text = body as string;
    if (text === "") return done(null, undefined);
    const problem = structureProblem(text, MAX_BODY_DEPTH);
    if (problem !== undefined) return done(errors.invalidBody(`Invalid body: ${problem}`), undefined);
    const marked = markInexactNumbers(text);
    defaultJson(request, marked, (error, parsed) => {
      if (error) done(isJson(text) ? errors.invalidBody(PROTOTYPE_KEY) : error, undefined);
      // Only a body that held an inexact number needs the walk.
      else done(null, marked === text ? parsed : restoreInexactNumbers(parsed));
    });
  });
  app.addContentTypeParser("*", { parseAs: "string" }, (request, body, done) => {
    if (body === "") done(null, undefined);
    else done(errors.unsupportedMediaType(request.headers["content-type"] ?? ""), undefined);
  });
  app.addHook("preValidation", async (request) => {
    checkStorable(request);
    if (takesNoBody(request) && !isNoBody(request.body))
      throw errors.invalidBody(`${request.method} ${request.routeOptions.url} takes no body`);
  });
}
