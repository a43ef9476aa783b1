import type { FastifyRequest, RouteOptions } from "fastify";
import { z } from "zod";
import {
  claimIdempotencyKey,
  finishIdempotencyClaim,
  type IdempotencyClaim,
  requestFingerprint,
  type StoredResponse,
} from "../idempotency/idempotency.ts";
import type { ErrorCode } from "../internal/errors.ts";
import { errors } from "../internal/errors.ts";
import { findTransactionForAccount, type TransactionRow } from "../transactions/transactions.ts";
import type { App, Principal, Services } from "./types.ts";

/** What a route declares to be idempotent: how to answer for a spend a dead process recorded. */
export interface IdempotentRoute {
  /** The response for the transaction the request had recorded, read back instead of redone. */
  resume(request: FastifyRequest, transaction: TransactionRow): Promise<StoredResponse> | StoredResponse;
  /**
   * Whether a success is remembered; default every one. A success not remembered, of a request that
   * recorded no spend, frees its key as a refusal does (a retry is evaluated afresh, and can pay nothing
   * twice since nothing was paid).
   */
  remember?(response: StoredResponse): boolean;
}

declare module "fastify" {
  interface FastifyRequest {
    /** The Idempotency-Key this request owns, when its route is idempotent and the header was sent. */
    idempotencyClaim: IdempotencyClaim | null;
  }
  interface FastifyContextConfig {
    /** Honour `Idempotency-Key` on this route (every money-moving POST). */
    idempotency?: IdempotentRoute;
  }
}

const idempotencyKeyHeader = z
  .string()
  .min(1)
  .max(255)
  .meta({ description: "Retries with the same key and body answer the first response; 1–255 characters" });

/**
 * The one Idempotency-Key mechanism, for every route that declares `config.idempotency`:
 * - before the handler, the key is claimed; a repeat of a finished request is answered from what was
 *   remembered (`Idempotent-Replayed: true`), a remembered refusal going through the one error handler;
 * - the handler gets `request.idempotencyClaim` to link the spend it records, in the spend's transaction;
 * - after the response is made, the claim is finished: successes, and errors after a spend was recorded,
 *   are remembered; refusals that moved nothing free the key (see {@link finishIdempotencyClaim}).
 */
export function installIdempotency(app: App, services: Services): void {
  app.decorateRequest("idempotencyClaim", null);
  app.addHook("onRoute", (route: RouteOptions) => {
    if (!route.config?.idempotency) return;
    const headers = z.object({ "idempotency-key": idempotencyKeyHeader.optional() }).passthrough();
    route.schema = { ...route.schema, headers };
  });
  app.addHook("preHandler", async (request, reply) => {
    const idempotent = request.routeOptions.config.idempotency;
    const key = request.headers["idempotency-key"];
    if (!idempotent || typeof key !== "string" || !request.principal) return;
    const outcome = await claimIdempotencyKey(
      services.store.db,
      {
        accountId: request.principal.accountId,
        key: idempotencyNamespace(request.principal) + key,
        fingerprint: requestFingerprint(request.method, request.routeOptions.url ?? "", {
          params: request.params,
          body: withoutEvidence(request.body),
        }),
      },
      services.now,
    );
    reply.header("idempotent-replayed", String(outcome.kind === "replay"));
    if (outcome.kind === "replay") {
      const stored = outcome.response;
      const refusal = (stored.body as { error?: StoredRefusal } | null)?.error;
      if (refusal) throw errors.replayed(stored.status, refusal);
      return reply.status(stored.status).send(stored.body);
    }
    request.idempotencyClaim = outcome.claim;
    if (outcome.kind === "resume") {
      const recorded = await findTransactionForAccount(
        services.store.db,
        request.principal.accountId,
        outcome.transactionId,
      );
      const response = await idempotent.resume(request, recorded);
      return reply.status(response.status).send(response.body);
    }
  });
  app.addHook("onSend", async (request, reply, payload) => {
    const claim = request.idempotencyClaim;
    if (!claim) return payload;
    request.idempotencyClaim = null;
    try {
      const body = typeof payload === "string" && payload !== "" ? JSON.parse(payload) : null;
      const response = { status: reply.statusCode, body };
      const remember = request.routeOptions.config.idempotency?.remember?.(response) ?? true;
      await finishIdempotencyClaim(services.store.db, claim, response, { remember });
    } catch (error) {
      // The claim stays in progress; a retry takes it over once it is stale, and resumes from its spend.
      request.log.error({ err: error }, "could not record the Idempotency-Key's response");
    }
    return payload;
  });
}

/**
 * What a request asks for, without the evidence it carries for it: a body's `spendAuthorization` (the
 * daemon's decision) is, like the Authorization header, not part of it. A client's gate retrying a spend
 * whose answer was lost asks the daemon again; its retry, carrying the new decision, is the same request and
 * is answered from the first, whose decision that answer names (the client gives the new one back).
 */
function withoutEvidence(body: unknown): unknown {
  if (!body || typeof body !== "object" || Array.isArray(body) || !("spendAuthorization" in body))
    return body;
  const { spendAuthorization: _evidence, ...asked } = body as Record<string, unknown>;
  return asked;
}

/**
 * Keys are the account's, shared by its credentials that see all of its wallets (namespace `:`); a key
 * limited to some wallets has a namespace of its own (`<key id>:`), so it can neither learn which keys
 * others used nor take them. The first colon ends a namespace (a key id holds none), so no header value
 * reaches into another's.
 */
function idempotencyNamespace(principal: Principal): string {
  if (principal.walletIds === null || principal.credential.kind !== "api_key") return ":";
  return `${principal.credential.keyId}:`;
}

interface StoredRefusal {
  code: ErrorCode;
  message: string;
  reason?: string;
  details?: Record<string, unknown>;
}
