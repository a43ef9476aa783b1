import { createHash } from "node:crypto";
import type { FastifyRequest } from "fastify";
import { authenticateApiKey } from "../api-keys/api-keys.ts";
import { API_KEY_PREFIX } from "../internal/crypto.ts";
import { errors } from "../internal/errors.ts";
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
    const { accountId, keyId } = await authenticateApiKey(services.store.db, credential);
    return { accountId, credential: { kind: "api_key", keyId } };
  }
  const accountId = await services.accessTokens.verify(credential);
  return { accountId, credential: { kind: "access_token" } };
}

/**
 * Installs the per-address limit on every request, and on every route not marked `public` the credential
 * check followed by the per-credential limit.
 */
export function installGuards(app: App, services: Services): void {
  const limits = services.config.rateLimits;
  app.decorateRequest("principal", null);
  // Both run before the body is read: an unauthenticated caller costs no parsing.
  app.addHook("onRequest", async (request) => {
    await enforceRateLimit(services, request, `addr:${request.ip}`, limits.perAddress);
    if (request.routeOptions.config.auth === "public" || !request.routeOptions.url) return;
    const header = request.headers.authorization;
    if (header)
      await enforceRateLimit(services, request, `cred:${credentialKey(header)}`, limits.perCredential);
    request.principal = await authenticate(services, header);
  });
}
