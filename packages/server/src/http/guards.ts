import { createHash } from "node:crypto";
import type { FastifyContextConfig, FastifyRequest, RouteOptions } from "fastify";
import { accountExists } from "../accounts/accounts.ts";
import { authenticateApiKey } from "../api-keys/api-keys.ts";
import { API_KEY_PREFIX } from "../internal/crypto.ts";
import { errors } from "../internal/errors.ts";
import { describeCredential, hasRole, mayActOnWallet } from "./access.ts";
import type { App, Principal, Services } from "./types.ts";

const MINUTE_MS = 60_000;

/**
 * Counts a request against a limit; throws RateLimitExceeded when it is over. If the limiter itself fails
 * (Redis down), the request goes through and the failure is logged: an outage of the counter store should
 * not take the wallets offline.
 */
export async function enforceRateLimit(
  services: Services,
  request: FastifyRequest,
  key: string,
  limit: number,
): Promise<void> {
  let decision: Awaited<ReturnType<Services["rateLimiter"]["hit"]>>;
  try {
    decision = await services.rateLimiter.hit(key, limit, MINUTE_MS);
  } catch (error) {
    request.log.warn({ err: error }, "rate limiter unavailable; request allowed");
    return;
  }
  if (!decision.allowed) throw errors.rateLimited(Math.max(1, Math.ceil(decision.retryAfterMs / 1000)));
}

/** A stable, non-reversible name for a credential, so limiter keys never hold the credential itself. */
function credentialKey(credential: string): string {
  return createHash("sha256").update(credential).digest("base64url").slice(0, 32);
}

async function authenticate(services: Services, header: string | undefined): Promise<Principal> {
  if (!header) throw errors.missingCredentials();
  const match = /^Bearer[ ]+(\S+)\s*$/i.exec(header);
  if (!match?.[1]) throw errors.invalidCredentials();
  const credential = match[1];
  if (credential.startsWith(API_KEY_PREFIX)) {
    const key = await authenticateApiKey(services.store.db, credential);
    return {
      accountId: key.accountId,
      role: key.role,
      walletIds: key.walletIds,
      credential: { kind: "api_key", keyId: key.keyId },
    };
  }
  const accountId = await services.accessTokens.verify(credential);
  // A token outlives nothing it names: an account that is gone is not acted for.
  if (!(await accountExists(services.store.db, accountId))) throw errors.invalidCredentials();
  // The owner's login acts for the whole account.
  return { accountId, role: "admin", walletIds: null, credential: { kind: "access_token" } };
}

/** Refuses, at registration, a route that needs a credential but does not say which role or which wallet. */
function checkRouteDeclaresAccess(route: RouteOptions): void {
  const config = route.config as FastifyContextConfig | undefined;
  if (config?.auth === "public") return;
  if (!config?.role) throw new Error(`route ${route.method} ${route.url} declares no role`);
  if (/^\/v1\/wallets\/:id/.test(route.url) && config.walletParam !== "id")
    throw new Error(`route ${route.method} ${route.url} acts on a wallet but declares no walletParam`);
}

/**
 * Installs the per-address limit on every request, and on every route not marked `public` the credential
 * check followed by the per-credential limit.
 */
export function installGuards(app: App, services: Services): void {
  const limits = services.config.rateLimits;
  app.decorateRequest("principal", null);
  app.addHook("onRoute", checkRouteDeclaresAccess);
  // Both run before the body is read: an unauthenticated caller costs no parsing.
  app.addHook("onRequest", async (request) => {
    await enforceRateLimit(services, request, `addr:${request.ip}`, limits.perAddress);
    if (request.routeOptions.config.auth === "public" || !request.routeOptions.url) return;
    const header = request.headers.authorization;
    if (header)
      await enforceRateLimit(services, request, `cred:${credentialKey(header)}`, limits.perCredential);
    request.principal = await authenticate(services, header);
    const needed = request.routeOptions.config.role ?? "admin";
    if (!hasRole(request.principal, needed)) {
      throw errors.insufficientRole(
        needed === "read" ? "agent" : needed,
        `${request.method} ${request.routeOptions.url}`,
        describeCredential(request.principal),
      );
    }
  });
  // After validation, so the wallet id is well-formed; a wallet outside the credential's scope is absent.
  app.addHook("preHandler", async (request) => {
    const param = request.routeOptions.config.walletParam;
    if (!param || !request.principal) return;
    const walletId = (request.params as Record<string, string | undefined>)[param];
    if (walletId !== undefined && !mayActOnWallet(request.principal, walletId))
      throw errors.walletNotFound(walletId);
  });
}
