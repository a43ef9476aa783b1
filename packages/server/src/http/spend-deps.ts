import type { FastifyRequest } from "fastify";
import type { SpendAsker, SpendDeps } from "../spends/send.ts";
import { principalOf, type Services } from "./types.ts";

/** What the spend pipeline needs, taken from the service's parts: one place for every spending route. */
export function spendDeps(services: Services): SpendDeps {
  return {
    db: services.store.db,
    keyring: services.keyring,
    chainClient: (name: string) => services.chains.client(name),
    authzd: services.authzd,
    now: services.now,
    approvalTtlMs: services.config.approvalTtlSeconds * 1000,
  };
}

/** Who asks, for the spend pipeline: the request's Idempotency-Key claim and the credential it came with. */
export function spendAsker(request: FastifyRequest): SpendAsker {
  const { accountId, credential } = principalOf(request);
  return {
    idempotency: request.idempotencyClaim ?? undefined,
    credential:
      credential.kind === "api_key"
        ? { kind: "api_key", keyId: credential.keyId }
        : { kind: "access_token", accountId, tokenId: credential.tokenId, expiresAt: credential.expiresAt },
  };
}
