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

/** The facts an error carries for its caller; each factory below declares its own shape. */
export type ErrorDetails = Readonly<Record<string, unknown>>;

/** One problem in a request's input: where (a path, never the offending text) and what is wrong. */
export type ValidationIssue = { path: string; message: string };
/** What a refused request's input got wrong, field by field. */
export type ValidationDetails = { issues: ValidationIssue[] };

/** The facts of each policy refusal, by its reason: the rule that refused and the amounts it compared. */
export type PolicyViolationDetails = {
  policy_paused: { rule: "status" };
  spend_authorization_required: { rule: "requireSpendAuthorization" };
  recipient_not_allowed: { rule: "whitelist"; recipient: string };
  price_unavailable: { rule: "price"; token: string; chain: string };
  /** USD amounts as decimal strings. */
  /** `recipientAccountRent`: the part of `requested` that opens the recipient's token account (Solana). */
  max_per_tx: { rule: "maxPerTx"; limit: string; requested: string; recipientAccountRent?: string };
  /** USD amounts as decimal strings; `resetsAt` an ISO date. */
  daily_limit: {
    rule: "dailyLimit";
    limit: string;
    used: string;
    requested: string;
    remaining: string;
    resetsAt: string;
    recipientAccountRent?: string;
  };
  /** x402 payments cannot wait for an owner: above `approvalAbove` they are refused. */
  approval_required: { rule: "approvalAbove"; limit: string; requested: string };
  spend_authorization_invalid: { rule: "spendAuthorization"; decisionId: string };
  spend_authorization_used: { rule: "spendAuthorization"; decisionId: string };
  /** The first fact that differs between the authorization and the spend. */
  spend_authorization_mismatch: {
    rule: "spendAuthorization";
    decisionId: string;
    field: string;
    authorized: string;
    requested: string;
  };
};

/** The facts of each shortfall, by its reason; amounts in whole tokens as decimal strings. */
export type InsufficientFundsDetails = {
  insufficient_token: { token: string; balance: string; required: string };
  insufficient_gas: { token: string; available: string; required: string };
};

/** A faucet request over a cap; amounts in whole tokens as decimal strings, `resetsAt` an ISO date. */
export type FaucetCapDetails = {
  scope: "wallet" | "account";
  chain: string;
  token: string;
  cap: string;
  used: string;
  requested: string;
  remaining: string;
  resetsAt: string;
};

/**
 * An error the service means to show its caller. `Details` is the shape its factory declares, so code
 * that reads the facts of an error it made is checked against that shape.
 */
export class AppError<Details extends ErrorDetails | undefined = ErrorDetails | undefined> extends Error {
  override name = "AppError";
  constructor(
    readonly status: number,
    readonly code: ErrorCode,
    message: string,
    readonly reason?: string,
    readonly details?: Details,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** Which limit a 429 hit (`details.scope`), and what it counts, as its message says. */
const RATE_LIMIT_SCOPES = {
  address: "requests from this client address (SVC_RATE_LIMIT_PER_ADDRESS_PER_MINUTE)",
  credential: "requests with this credential (SVC_RATE_LIMIT_PER_MINUTE)",
  login_email: "login attempts for this email",
  login_device: "login attempts from this device",
  login_address: "login attempts from this client address",
  registration: "registrations from this client address",
} as const;
export type RateLimitScope = keyof typeof RATE_LIMIT_SCOPES;

/** Error factories: one per situation in api.md's error table. */
export const errors = {
  invalidBody: (message: string, details?: ValidationDetails) =>
    new AppError(400, "ValidationError", message, "invalid_body", details),
  invalidQuery: (message: string, details?: ValidationDetails) =>
    new AppError(400, "ValidationError", message, "invalid_query", details),
  invalidParams: (message: string, details?: ValidationDetails) =>
    new AppError(400, "ValidationError", message, "invalid_params", details),
  invalidHeader: (message: string, details?: ValidationDetails) =>
    new AppError(400, "ValidationError", message, "invalid_header", details),
  unsupportedMediaType: (contentType: string) =>
    new AppError(
      415,
      "ValidationError",
      `Unsupported Content-Type ${JSON.stringify(contentType.slice(0, 100))}; send application/json`,
      "unsupported_media_type",
    ),
  /** What Node's HTTP parser refused before there was a request to route (answered on the socket). */
  malformedRequest: () =>
    new AppError(400, "ValidationError", "The request is not well-formed HTTP/1.1", "malformed_request"),
  headersTooLarge: () =>
    new AppError(431, "ValidationError", "The request's headers are too large", "headers_too_large"),
  requestTimeout: () =>
    new AppError(
      408,
      "ValidationError",
      "The request's headers and body did not all arrive in time",
      "request_timeout",
    ),
  bodyTooLarge: (limitBytes: number) =>
    new AppError(413, "ValidationError", `Request body exceeds ${limitBytes} bytes`, "body_too_large"),
  emailTaken: () =>
    new AppError(409, "ValidationError", "An account with this email already exists", "email_taken"),
  /** A spend's approval was already approved, rejected or expired. */
  alreadyDecided: (transactionId: string, approval: string, failureReason?: string | null) =>
    new AppError(
      409,
      "ValidationError",
      `The approval of ${transactionId} was already decided: ${approval}${failureReason ? ` (${failureReason})` : ""}`,
      "already_decided",
      { transactionId, approval, ...(failureReason ? { failureReason } : {}) },
    ),
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

  invalidAddress: (chain: string, problem?: string) =>
    new AppError(
      400,
      "ValidationError",
      `Invalid recipient address for ${chain}${problem ? `: ${problem}` : ""}`,
      "invalid_address",
      { chain },
    ),
  /** A recipient where whatever is sent is lost; `what` names it (see `lostAt`). */
  lostRecipient: (chain: string, address: string, what: string) =>
    new AppError(
      400,
      "ValidationError",
      `Refusing to send to ${address} on ${chain}: it is ${what}, not a recipient (whatever the chain lets through to it can never be spent again)`,
      "invalid_address",
      { chain },
    ),
  /** An EVM recipient whose code would make receiving the native coin cost more gas than a send may take. */
  costlyRecipient: (chain: string, address: string, symbol: string, gas: bigint, maxGas: bigint) =>
    new AppError(
      400,
      "ValidationError",
      `Refusing to send ${symbol} to ${address} on ${chain}: its code would take up to ${gas.toLocaleString("en")} gas to receive it, paid from this wallet's ${symbol} as fees (a plain transfer takes 21,000; a send may take at most ${maxGas.toLocaleString("en")})`,
      "recipient_too_costly",
      { chain, gas: gas.toString(), maxGas: maxGas.toString() },
    ),
  weakPassword: (message: string) => new AppError(400, "ValidationError", message, "weak_password"),
  invalidAmount: (message: string) => new AppError(400, "ValidationError", message, "invalid_amount"),
  /** Amounts in whole native coins as decimal strings. */
  belowRentMinimum: (
    message: string,
    details: {
      chain: string;
      account: "recipient" | "sender";
      token: string;
      minimum: string;
      resulting: string;
    },
  ) => new AppError(400, "ValidationError", message, "below_rent_minimum", details),
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
  policyViolation: <Reason extends keyof PolicyViolationDetails>(
    reason: Reason,
    message: string,
    details: PolicyViolationDetails[Reason],
  ) => new AppError(403, "PolicyViolation", message, reason, details),
  insufficientFunds: <Reason extends keyof InsufficientFundsDetails>(
    reason: Reason,
    message: string,
    details: InsufficientFundsDetails[Reason],
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
  /**
   * The node answered a read with an error, or with what cannot be read (no contract there): for a while (a
   * node behind, a block not served yet) or for good (a token configured where no contract is).
   */
  chainReadRefused: (chain: string, method: string, cause?: unknown) =>
    new AppError(
      502,
      "InternalError",
      `The ${chain} node refused ${method}`,
      "chain_read_refused",
      { chain, method },
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

  /** An outbound request (x402 fetch) to a private, loopback or link-local address, or not over http(s). */
  destinationNotAllowed: (message: string, details?: Record<string, unknown>) =>
    new AppError(400, "ValidationError", message, "destination_not_allowed", details),
  /** The resource an outbound request was for did not answer usably: unreachable, too slow, too large. */
  resourceUnavailable: (
    reason: "resource_unreachable" | "resource_timeout" | "resource_too_large" | "too_many_redirects",
    message: string,
    details?: Record<string, unknown>,
    cause?: unknown,
  ) => new AppError(502, "InternalError", message, reason, details, { cause }),
  /** A 402 whose challenge cannot be read (no usable header or body, malformed JSON or fields). */
  invalidPaymentChallenge: (message: string, details?: Record<string, unknown>) =>
    new AppError(502, "InternalError", message, "invalid_payment_challenge", details),
  /**
   * No requirement of a readable challenge can be paid by this wallet: networks or assets it does not hold,
   * a `chain` the caller asked for that is not offered, or (`max_amount_exceeded`) every price over `maxAmount`.
   */
  noPayableRequirement: (
    reason: "no_payable_requirement" | "max_amount_exceeded",
    message: string,
    details: Record<string, unknown>,
  ) => new AppError(400, "ValidationError", message, reason, details),

  /**
   * An x402 payment was signed and sent, and no answer came back (timeout, connection lost): it may still
   * settle. Its transaction stays `pending` and completes from the chain; a retry never pays again.
   */
  paymentOutcomeUnknown: (transactionId: string, message: string, cause?: unknown) =>
    new AppError(
      502,
      "InternalError",
      `${message}. The payment was signed and sent; transaction ${transactionId} completes from the chain (it is not paid again)`,
      "payment_outcome_unknown",
      { transactionId },
      { cause },
    ),
  /**
   * An x402 payment identical to one the store already holds: signed by another instance at the same
   * moment, alike in every field. Nothing was recorded or sent; a retry signs a different one.
   */
  paymentNotUnique: () =>
    new AppError(
      409,
      "ValidationError",
      "Another payment identical to this one was recorded a moment ago (signed by another instance of the service); this one was neither recorded nor sent. Retry: it is signed differently",
      "payment_not_unique",
    ),
  /** The configured x402 facilitator offers no discovery endpoint (or none is configured, or it is down). */
  discoveryUnavailable: (message: string, cause?: unknown) =>
    new AppError(502, "InternalError", message, "discovery_unavailable", undefined, { cause }),

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
  insufficientRole: (needed: "admin" | "agent", action: string, held: string, severalActions = false) =>
    new AppError(
      403,
      "Forbidden",
      `${action} ${severalActions ? "need" : "needs"} an ${needed} credential; this request was made with ${held}`,
      "insufficient_role",
      { needed },
    ),
  /** The request names a host the service does not answer to (http/host-check.ts). */
  hostNotAllowed: () =>
    new AppError(
      403,
      "Forbidden",
      "This service does not answer to the host this request names: reach it by its address or localhost, or ask the operator to add the name to SVC_ALLOWED_HOSTS",
      "host_not_allowed",
    ),
  tokenExpired: () => new AppError(401, "Unauthorized", "The access token has expired", "token_expired"),
  tokenEnded: () =>
    new AppError(401, "Unauthorized", "This access token was ended by logging out", "token_ended"),
  notALogin: () =>
    new AppError(
      400,
      "ValidationError",
      "Logging out ends a login's access token; an API key is revoked with DELETE /v1/api-keys/:id",
      "not_an_access_token",
    ),
  /** Same status and message for an unknown email and a wrong password. */
  loginFailed: () => new AppError(401, "Unauthorized", "Invalid email or password", "invalid_credentials"),

  faucetUnavailable: (chain: string, why: string) =>
    new AppError(404, "NotFound", `No faucet on ${chain}: ${why}`, "faucet_unavailable", { chain }),
  /** Over the faucet's daily cap for this wallet, chain and token; `details` says how much is left. */
  faucetCapExceeded: (message: string, details: FaucetCapDetails) =>
    new AppError(400, "ValidationError", message, "faucet_cap_exceeded", details),
  walletNotFound: (walletId: string) => new AppError(404, "NotFound", `Wallet ${walletId} not found`),
  apiKeyNotFound: (keyId: string) => new AppError(404, "NotFound", `API key ${keyId} not found`),
  transactionNotFound: (txId: string) => new AppError(404, "NotFound", `Transaction ${txId} not found`),
  approvalNotFound: (txId: string) =>
    new AppError(
      404,
      "NotFound",
      `No approval ${txId}: no spend of this account waited for one with this id`,
    ),
  webhookEndpointNotFound: (endpointId: string) =>
    new AppError(404, "NotFound", `Webhook endpoint ${endpointId} not found`),
  eventNotFound: (eventId: string) => new AppError(404, "NotFound", `Event ${eventId} not found`),
  /** A redelivery of an event the endpoint does not receive (its `events` leave that type out). */
  eventNotSubscribed: (eventId: string, type: string, endpointId: string) =>
    new AppError(
      409,
      "ValidationError",
      `Event ${eventId} is of type ${type}, which webhook endpoint ${endpointId} does not receive`,
      "event_not_subscribed",
      { eventId, type },
    ),
  tooManyRedeliveries: (endpointId: string, max: number) =>
    new AppError(
      409,
      "ValidationError",
      `Webhook endpoint ${endpointId} has ${max} redeliveries waiting, the most it may; ask again once they have gone out`,
      "too_many_redeliveries",
      { max },
    ),
  tooManyWallets: (max: number) =>
    new AppError(
      409,
      "ValidationError",
      `An account has at most ${max} wallets, archived ones included (they still receive, so they count); the operator sets the limit (SVC_MAX_WALLETS_PER_ACCOUNT)`,
      "too_many_wallets",
      { max },
    ),
  tooManyApiKeys: (max: number) =>
    new AppError(
      409,
      "ValidationError",
      `An account has at most ${max} API keys that are not revoked, expired ones included; revoke one first (DELETE /v1/api-keys/:id), or ask the operator to raise SVC_MAX_API_KEYS_PER_ACCOUNT`,
      "too_many_api_keys",
      { max },
    ),
  tooManyWebhookEndpoints: (max: number) =>
    new AppError(
      409,
      "ValidationError",
      `An account has at most ${max} webhook endpoints; delete one first`,
      "too_many_webhook_endpoints",
      { max },
    ),
  /** A file route's 412 or 416: the request's `If-Match`, `If-Unmodified-Since` or `Range` cannot be met. */
  fileConditionUnmet: (status: 412 | 416) =>
    status === 416
      ? new AppError(
          416,
          "ValidationError",
          "The requested range is not in the file",
          "range_not_satisfiable",
        )
      : new AppError(
          412,
          "ValidationError",
          "A precondition of the request does not hold",
          "precondition_failed",
        ),
  routeNotFound: (method: string, url: string) =>
    new AppError(404, "NotFound", `No route ${method} ${url.split("?")[0]}`, "route_not_found"),

  rateLimited: (scope: RateLimitScope, retryAfterSeconds: number) =>
    new AppError(
      429,
      "RateLimitExceeded",
      `Too many ${RATE_LIMIT_SCOPES[scope]}; retry after ${retryAfterSeconds}s`,
      undefined,
      { scope, retryAfterSeconds },
    ),

  tooManyFetches: (max: number) =>
    new AppError(
      429,
      "RateLimitExceeded",
      `At most ${max} x402 fetches of one account run at once; retry after 1s`,
      "too_many_fetches",
      { retryAfterSeconds: 1 },
    ),

  /** A refusal remembered under an Idempotency-Key, answered again (with the new request's id). */
  replayed: (
    status: number,
    stored: { code: ErrorCode; message: string; reason?: string; details?: ErrorDetails },
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
  /** A stored key that does not open for its wallet: moved from another wallet, or damaged. Nothing is signed. */
  walletKeyUnusable: (walletId: string, cause?: unknown) =>
    new AppError(
      500,
      "InternalError",
      `The stored signing key of wallet ${walletId} does not open for this wallet; nothing was signed. The request id locates it in the log`,
      "wallet_key_unusable",
      { walletId },
      { cause },
    ),
  storeUnavailable: (cause?: unknown) =>
    new AppError(503, "InternalError", "The store is not answering", "store_unavailable", undefined, {
      cause,
    }),
} as const;
