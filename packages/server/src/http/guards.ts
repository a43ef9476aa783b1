import type { FastifyContextConfig, RouteOptions } from "fastify";
import { ensureAccessTokenLive } from "../accounts/accounts.ts";
import { authenticateApiKey, ensureApiKeyLive } from "../api-keys/api-keys.ts";
import { API_KEY_PREFIX } from "../internal/crypto.ts";
import { errors, type RateLimitScope } from "../internal/errors.ts";
import { addressLimitKey } from "../internal/ip-address.ts";
import { describeCredential, hasRole, mayActOnWallet } from "./access.ts";
import { DOCS_PREFIX } from "./openapi.ts";
import type { OwnRequests } from "./own-requests.ts";
import type { App, Principal, Role, Services } from "./types.ts";

const MINUTE_MS = 60_000;

/**
 * Counts a request against a limit; throws RateLimitExceeded, naming the limit, when it is over. Never fails
 * open: a shared limiter that is down is backed by counters in this process (FailoverRateLimiter).
 */
export async function enforceRateLimit(
  services: Services,
  counted: { key: string; limit: number; scope: RateLimitScope },
): Promise<void> {
  const decision = await services.rateLimiter.hit(counted.key, counted.limit, MINUTE_MS);
  if (!decision.allowed)
    throw errors.rateLimited(counted.scope, Math.max(1, Math.ceil(decision.retryAfterMs / 1000)));
}

/**
 * The per-credential limiter key: the credential's identity, not the header's spelling (`bearer K` and
 * `Bearer  K` are one credential). An access token counts for its account: every token of an account
 * shares one budget, so logging in again does not reset it.
 */
function credentialLimitKey(principal: Principal): string {
  return principal.credential.kind === "api_key"
    ? `cred:key:${principal.credential.keyId}`
    : `cred:acct:${principal.accountId}`;
}

async function authenticate(services: Services, header: string | undefined): Promise<Principal> {
  if (!header) throw errors.missingCredentials();
  const match = /^Bearer[ ]+(\S+)\s*$/i.exec(header);
  if (!match?.[1]) throw errors.invalidCredentials();
  const credential = match[1];
  if (credential.startsWith(API_KEY_PREFIX)) {
    const key = await authenticateApiKey(services.store.db, credential, services.now());
    return {
      accountId: key.accountId,
      role: key.role,
      walletIds: key.walletIds,
      credential: { kind: "api_key", keyId: key.keyId },
    };
  }
  const token = await services.accessTokens.verify(credential);
  // A token outlives nothing it names (an account that is gone is not acted for), nor its owner's logout.
  await ensureAccessTokenLive(services.store.db, token, services.now());
  // The owner's login acts for the whole account.
  return {
    accountId: token.accountId,
    role: "admin",
    walletIds: null,
    credential: { kind: "access_token", tokenId: token.tokenId, expiresAt: token.expiresAt },
  };
}

/**
 * The config of a route on one wallet (`/v1/wallets/:id…`): the least role it needs, and the wallet its
 * `:id` names, which a credential bound to other wallets may not reach.
 * @example app.route({ url: "/v1/wallets/:id", config: onWallet("read"), … })
 */
export function onWallet(role: Role) {
  return { auth: "account", role, walletParam: "id" } as const;
}

/** Refuses, at registration, a route that needs a credential but does not say which role or which wallet. */
function checkRouteDeclaresAccess(route: RouteOptions): void {
  // The documentation UI's routes come from a plugin that declares no config: public by their path.
  if (route.url === DOCS_PREFIX || route.url.startsWith(`${DOCS_PREFIX}/`)) {
    route.config = { ...route.config, auth: "public" };
    return;
  }
  const config = route.config as FastifyContextConfig | undefined;
  if (config?.auth === "public") return;
  if (!config?.role) throw new Error(`route ${route.method} ${route.url} declares no role`);
  if (/^\/v1\/wallets\/:id/.test(route.url) && config.walletParam !== "id")
    throw new Error(`route ${route.method} ${route.url} acts on a wallet but declares no walletParam`);
}

/**
 * Installs the per-address limit on every request (the service's own counted for the client they were made
 * for, see {@link OwnRequests}), and on every route not marked `public` the credential check followed by the
 * per-credential limit.
 */
export function installGuards(app: App, services: Services, ownRequests: OwnRequests): void {
  const limits = services.config.rateLimits;
  app.decorateRequest("principal", null);
  app.addHook("onRoute", checkRouteDeclaresAccess);
  // Both run before the body is read: an unauthenticated caller costs no parsing.
  app.addHook("onRequest", async (request) => {
    const address = addressLimitKey(ownRequests.clientOf(request) ?? request.ip);
    await enforceRateLimit(services, { key: `addr:${address}`, limit: limits.perAddress, scope: "address" });
    if (request.routeOptions.config.auth === "public" || !request.routeOptions.url) return;
    // A credential that fails authentication has no identity to count by: the per-address limit covers it.
    const principal = await authenticate(services, request.headers.authorization);
    await enforceRateLimit(services, {
      key: credentialLimitKey(principal),
      limit: limits.perCredential,
      scope: "credential",
    });
    request.principal = principal;
    const needed = request.routeOptions.config.role ?? "admin";
    if (!hasRole(request.principal, needed)) {
      throw errors.insufficientRole(
        needed === "read" ? "agent" : needed,
        `${request.method} ${request.routeOptions.url}`,
        describeCredential(request.principal),
      );
    }
  });
  app.addHook("preHandler", async (request) => {
    const principal = request.principal;
    if (!principal) return;
    // The credential was checked before the body was read, which its client may take as long as it likes
    // to send: a key revoked (or expired), or a login ended, meanwhile acts for nothing, not even a request
    // it began before.
    if (request.method !== "GET" && request.method !== "HEAD") {
      const { credential } = principal;
      if (credential.kind === "api_key")
        await ensureApiKeyLive(services.store.db, credential.keyId, services.now());
      else
        await ensureAccessTokenLive(
          services.store.db,
          { accountId: principal.accountId, ...credential },
          services.now(),
        );
    }
    // After validation, so the wallet id is well-formed; a wallet outside the credential's scope is absent.
    const param = request.routeOptions.config.walletParam;
    if (!param) return;
    const walletId = (request.params as Record<string, string | undefined>)[param];
    if (walletId !== undefined && !mayActOnWallet(principal, walletId)) throw errors.walletNotFound(walletId);
  });
}
