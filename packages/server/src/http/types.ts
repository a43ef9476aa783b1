import type {
  FastifyBaseLogger,
  FastifyInstance,
  RawReplyDefaultExpression,
  RawRequestDefaultExpression,
  RawServerDefault,
} from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import type { AccessTokens } from "../accounts/access-tokens.ts";
import type { LoginDevices } from "../accounts/login-devices.ts";
import type { AuthzdClient } from "../authzd/client.ts";
import type { ChainRegistry } from "../chains/registry.ts";
import type { Faucet } from "../faucet/faucet.ts";
import type { Config } from "../internal/config.ts";
import type { Store } from "../internal/db/store.ts";
import type { RateLimiter } from "../internal/rate-limit.ts";
import type { Keyring } from "../wallets/keyring.ts";
import type { OutboundFetcher } from "../x402/outbound-fetch.ts";

/** The fastify instance every route registers on, with zod schemas as its type provider. */
export type App = FastifyInstance<
  RawServerDefault,
  RawRequestDefaultExpression,
  RawReplyDefaultExpression,
  FastifyBaseLogger,
  ZodTypeProvider
>;

/** What the routes are handed by the composition root. */
export interface Services {
  config: Config;
  store: Store;
  keyring: Keyring;
  accessTokens: AccessTokens;
  /** The device tokens logins hand out, by which a known device's login attempts are counted. */
  loginDevices: LoginDevices;
  chains: ChainRegistry;
  rateLimiter: RateLimiter;
  faucet: Faucet;
  /** Requests to URLs callers name (x402 resources), guarded by `SVC_OUTBOUND_ALLOW`. */
  outbound: OutboundFetcher;
  /** Webhook deliveries' requests, behind the same guard; endpoints' URLs are checked with it when created. */
  webhookOutbound: OutboundFetcher;
  /** The authorization daemon, when the service is configured with one. */
  authzd: AuthzdClient | undefined;
  /**
   * The clock that expiries and windows are measured by (API keys, access tokens, stale Idempotency-Key
   * claims, the daily limit's rolling window): the system clock, or one that tests move forward.
   */
  now: () => Date;
}

/** What a credential may do: `read` < `agent` < `admin` (api.md, "Credentials and roles"). */
export type Role = "admin" | "agent" | "read";

/** Who a request acts for, set by authentication on every route that needs it. */
export interface Principal {
  accountId: string;
  role: Role;
  /** The wallets this credential may see and act on; null = every wallet of the account. */
  walletIds: readonly string[] | null;
  credential: { kind: "api_key"; keyId: string } | { kind: "access_token"; tokenId: string; expiresAt: Date };
}

declare module "fastify" {
  interface FastifyRequest {
    principal: Principal | null;
  }
  interface FastifyContextConfig {
    /** `public` routes need no credential; every other route needs one. */
    auth?: "public" | "account";
    /** The least role an `account` route needs; every such route declares one. */
    role?: Role;
    /** The path parameter naming a wallet: a credential bound to other wallets gets 404 there. */
    walletParam?: string;
  }
}

/** The principal of an authenticated route; routes marked `account` always have one. */
export function principalOf(request: { principal: Principal | null }): Principal {
  if (!request.principal) throw new Error("route reached without authentication");
  return request.principal;
}
