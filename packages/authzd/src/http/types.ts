import type { IncomingMessage } from "node:http";
import type { AuthzService } from "../authz/service.ts";
import type { Identity } from "../authz/state.ts";

/** Who is calling: the operator (administration) or a named identity (spends). */
export type Caller = { kind: "operator" } | { kind: "identity"; identity: Identity };

/** What a handler receives. */
export interface RequestContext {
  req: IncomingMessage;
  path: string;
  query: URLSearchParams;
  /** Null for routes with `auth: "none"`. */
  caller: Caller | null;
  service: AuthzService;
  /** Parses the body as JSON; throws 415 or 400. Deferred so that auth and capability checks come first. */
  json(): unknown;
}

/** A JSON reply. */
export interface Reply {
  status: number;
  body: unknown;
}

/**
 * One operation: method, path, who may call it, and a thin handler.
 * `path` ending in `/:name` matches one more path segment, passed as `ctx.path`'s last segment.
 */
export interface Route {
  method: "GET" | "POST";
  path: string;
  auth: "none" | "operator" | "identity" | "any";
  handle(ctx: RequestContext): Reply | Promise<Reply>;
}
