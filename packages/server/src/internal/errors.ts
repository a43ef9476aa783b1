/**
 * The service's one list of errors. Domain code throws these through the factories below; the single
 * HTTP error handler renders them as `{ error: { code, message, requestId, reason?, details? } }`.
 */

/** The spec's error codes (section 7), plus api.md's two: a missing role, and faults of our own. */
export type ErrorCode =
  | "Unauthorized"
  | "Forbidden"
  | "NotFound"
  | "PolicyViolation"
  | "InsufficientFunds"
  | "ValidationError"
  | "RateLimitExceeded"
  | "InternalError";

/** An error the service means to show its caller. */
export class AppError extends Error {
  override name = "AppError";
  constructor(
    readonly status: number,
    readonly code: ErrorCode,
    message: string,
    readonly reason?: string,
    readonly details?: Record<string, unknown>,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** Error factories: one per situation in api.md's error table. */
export const errors = {
  invalidBody: (message: string, details?: Record<string, unknown>) =>
    new AppError(400, "ValidationError", message, "invalid_body", details),
  invalidQuery: (message: string, details?: Record<string, unknown>) =>
    new AppError(400, "ValidationError", message, "invalid_query", details),
  invalidParams: (message: string, details?: Record<string, unknown>) =>
    new AppError(400, "ValidationError", message, "invalid_params", details),
  invalidHeader: (message: string, details?: Record<string, unknown>) =>
    new AppError(400, "ValidationError", message, "invalid_header", details),
  unsupportedMediaType: (contentType: string) =>
    new AppError(
      415,
      "ValidationError",
      `Unsupported Content-Type ${JSON.stringify(contentType.slice(0, 100))}; send application/json`,
      "unsupported_media_type",
    ),
  bodyTooLarge: (limitBytes: number) =>
    new AppError(413, "ValidationError", `Request body exceeds ${limitBytes} bytes`, "body_too_large"),
  emailTaken: () =>
    new AppError(409, "ValidationError", "An account with this email already exists", "email_taken"),
  walletArchived: (walletId: string) =>
    new AppError(409, "ValidationError", `Wallet ${walletId} is archived`, "wallet_archived"),
  unknownChain: (chain: string, served: readonly string[]) =>
    new AppError(
      400,
      "ValidationError",
      `Unknown chain ${JSON.stringify(chain)}; this deployment serves ${served.join(", ")}`,
      "unknown_chain",
      { chain, served },
    ),

  invalidAddress: (chain: string) =>
    new AppError(400, "ValidationError", `Invalid recipient address for ${chain}`, "invalid_address", {
      chain,
    }),
  invalidAmount: (message: string) => new AppError(400, "ValidationError", message, "invalid_amount"),
  chainNotInWallet: (chain: string, walletChains: readonly string[]) =>
    new AppError(
      400,
      "ValidationError",
      `This wallet does not hold ${chain}; its chains are ${walletChains.join(", ")}`,
      "chain_not_in_wallet",
      { chain, walletChains },
    ),
  unknownToken: (token: string, chain: string, served: readonly string[]) =>
    new AppError(
      400,
      "ValidationError",
      `Token ${JSON.stringify(token)} is not served on ${chain}; tokens: ${served.join(", ")}`,
      "unknown_token",
      { token, chain, served },
    ),
  idempotencyKeyReused: () =>
    new AppError(
      409,
      "ValidationError",
      "This Idempotency-Key was used with a different request",
      "idempotency_key_reused",
    ),
  idempotencyKeyInUse: () =>
    new AppError(
      409,
      "ValidationError",
      "A request with this Idempotency-Key is still in progress; retry shortly",
      "idempotency_key_in_use",
    ),
  policyViolation: (
    reason:
      | "max_per_tx"
      | "daily_limit"
      | "recipient_not_allowed"
      | "policy_paused"
      | "price_unavailable"
      | "spend_authorization_required"
      | "spend_authorization_invalid"
      | "spend_authorization_mismatch"
      | "spend_authorization_used",
    message: string,
    details?: Record<string, unknown>,
  ) => new AppError(403, "PolicyViolation", message, reason, details),
  insufficientFunds: (
    reason: "insufficient_token" | "insufficient_gas",
    message: string,
    details: Record<string, unknown>,
  ) => new AppError(422, "InsufficientFunds", message, reason, details),
  chainUnavailable: (chain: string, cause?: unknown) =>
    new AppError(
      502,
      "InternalError",
      `The ${chain} RPC endpoint is not answering`,
      "chain_unavailable",
      { chain },
      { cause },
    ),
  broadcastRejected: (chain: string, message: string, cause?: unknown) =>
    new AppError(
      502,
      "InternalError",
      `The ${chain} network rejected the transaction: ${message}`,
      "broadcast_rejected",
      { chain },
      { cause },
    ),

  authzdNotConfigured: () =>
    new AppError(
      400,
      "ValidationError",
      "This service is not configured with an authorization daemon, so spendAuthorization.decisionId cannot be verified; send without it",
      "authzd_not_configured",
    ),
  authzdUnavailable: (cause?: unknown) =>
    new AppError(
      502,
      "InternalError",
      "The authorization daemon is not answering; the spend was not made",
      "authzd_unavailable",
      undefined,
      { cause },
    ),

  missingCredentials: () =>
    new AppError(
      401,
      "Unauthorized",
      "Missing credentials: send Authorization: Bearer <API key or access token>",
      "missing_credentials",
    ),
  invalidCredentials: () => new AppError(401, "Unauthorized", "Invalid credentials", "invalid_credentials"),
  keyRevoked: () => new AppError(401, "Unauthorized", "This API key has been revoked", "key_revoked"),
  keyExpired: () => new AppError(401, "Unauthorized", "This API key has expired", "key_expired"),
  /** The credential is valid but its role does not allow this; `action` says what was refused. */
  insufficientRole: (needed: "admin" | "agent", action: string, held: string) =>
    new AppError(
      403,
      "Forbidden",
      `${action} needs an ${needed} credential; this request was made with ${held}`,
      "insufficient_role",
      { needed },
    ),
  tokenExpired: () => new AppError(401, "Unauthorized", "The access token has expired", "token_expired"),
  /** Same status and message for an unknown email and a wrong password. */
  loginFailed: () => new AppError(401, "Unauthorized", "Invalid email or password", "invalid_credentials"),

  faucetUnavailable: (chain: string, why: string) =>
    new AppError(404, "NotFound", `No faucet on ${chain}: ${why}`, "faucet_unavailable", { chain }),
  /** Over the faucet's daily cap for this wallet, chain and token; `details` says how much is left. */
  faucetCapExceeded: (message: string, details: Record<string, unknown>) =>
    new AppError(400, "ValidationError", message, "faucet_cap_exceeded", details),
  walletNotFound: (walletId: string) => new AppError(404, "NotFound", `Wallet ${walletId} not found`),
  apiKeyNotFound: (keyId: string) => new AppError(404, "NotFound", `API key ${keyId} not found`),
  transactionNotFound: (txId: string) => new AppError(404, "NotFound", `Transaction ${txId} not found`),
  routeNotFound: (method: string, url: string) =>
    new AppError(404, "NotFound", `No route ${method} ${url.split("?")[0]}`, "route_not_found"),

  rateLimited: (retryAfterSeconds: number) =>
    new AppError(
      429,
      "RateLimitExceeded",
      `Too many requests; retry after ${retryAfterSeconds}s`,
      undefined,
      {
        retryAfterSeconds,
      },
    ),

  /** A refusal remembered under an Idempotency-Key, answered again (with the new request's id). */
  replayed: (
    status: number,
    stored: { code: ErrorCode; message: string; reason?: string; details?: Record<string, unknown> },
  ) => new AppError(status, stored.code, stored.message, stored.reason, stored.details),

  internal: (cause?: unknown) =>
    new AppError(
      500,
      "InternalError",
      "Internal error; the request id locates it in the log",
      undefined,
      undefined,
      {
        cause,
      },
    ),
  storeUnavailable: (cause?: unknown) =>
    new AppError(503, "InternalError", "The store is not answering", "store_unavailable", undefined, {
      cause,
    }),
} as const;
