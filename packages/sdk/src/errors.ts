/**
 * Every error the SDK throws is an {@link SvcError}. Errors the service answered carry its `code`, HTTP
 * `status`, `message` and `requestId` as sent; errors raised in the client (bad input, the gate, the
 * network) carry `status` 0 and no `requestId`.
 */
import type { Transaction } from "./types.ts";

/**
 * The body of every error the service answers, `/v1` and `/mcp` alike: `requestId` is the request's id, the same
 * as its `X-Request-Id` header.
 * @example
 * const body: ServiceErrorBody = { error: { code: "NotFound", message: "Wallet not found", requestId: "req_1" } };
 */
export interface ServiceErrorBody {
  error: {
    code: string;
    message: string;
    requestId: string;
    reason?: string;
    details?: Record<string, unknown>;
  };
}

/**
 * The fields every {@link SvcError} is built from.
 * @example
 * const init: SvcErrorInit = { code: "ValidationError", status: 0, message: "bad input", reason: "invalid_input" };
 */
export interface SvcErrorInit {
  /** The service's error code (spec 7 / api.md), or the client's own code for client-side errors. */
  code: string;
  /** The HTTP status of the service's answer; 0 when the error did not come from a service answer. */
  status: number;
  /** The service's own message (or the client's, for client-side errors). */
  message: string;
  /** The service's `requestId` (also its `X-Request-Id`); undefined for client-side errors. */
  requestId?: string | undefined;
  /** The snake_case sub-code a caller can branch on, e.g. `daily_limit`. */
  reason?: string | undefined;
  /** Facts about the error, e.g. `{ rule, limit, used, requested, remaining, resetsAt }`. */
  details?: Record<string, unknown> | undefined;
  /** The underlying error, when there is one. */
  cause?: unknown;
}

/**
 * Base class of every error the SDK throws.
 * @example
 * try {
 *   await wallet.send({ to, amount: 10, token: "USDC", chain: "base" });
 * } catch (error) {
 *   if (error instanceof SvcError) console.log(error.code, error.reason, error.requestId);
 * }
 */
export class SvcError extends Error {
  override name = "SvcError";
  readonly code: string;
  readonly status: number;
  readonly requestId: string | undefined;
  readonly reason: string | undefined;
  readonly details: Record<string, unknown> | undefined;

  constructor(init: SvcErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.code = init.code;
    this.status = init.status;
    this.requestId = init.requestId;
    this.reason = init.reason;
    this.details = init.details;
  }
}

/**
 * The credential is missing, wrong, revoked or expired (401 `Unauthorized`).
 * @example
 * if (error instanceof SvcUnauthorizedError && error.reason === "key_revoked") rotateKey();
 */
export class SvcUnauthorizedError extends SvcError {
  override name = "SvcUnauthorizedError";
}

/**
 * The credential lacks the role for this operation (403 `Forbidden`, reason `insufficient_role`), e.g. an
 * agent key raising a policy bound.
 * @example
 * if (error instanceof SvcForbiddenError) console.log("ask an admin:", error.message);
 */
export class SvcForbiddenError extends SvcError {
  override name = "SvcForbiddenError";
}

/**
 * The resource does not exist or belongs to another account (404 `NotFound`).
 * @example
 * const wallet = await svc.wallet.get(id).catch((e) => (e instanceof SvcNotFoundError ? null : Promise.reject(e)));
 */
export class SvcNotFoundError extends SvcError {
  override name = "SvcNotFoundError";
}

/**
 * The spend breaks the wallet's policy (403 `PolicyViolation`): `reason` is `max_per_tx`, `daily_limit`,
 * `recipient_not_allowed`, `policy_paused`, or a `spend_authorization_*` refusal; `details` holds the numbers.
 * @example
 * if (error instanceof SvcPolicyViolationError && error.reason === "daily_limit") {
 *   console.log(`try again after ${error.details?.resetsAt}`);
 * }
 */
export class SvcPolicyViolationError extends SvcError {
  override name = "SvcPolicyViolationError";
}

/**
 * The wallet lacks the token or the gas for the spend (422 `InsufficientFunds`).
 * @example
 * if (error instanceof SvcInsufficientFundsError) await wallet.faucet({ chain: "base", token: "USDC" });
 */
export class SvcInsufficientFundsError extends SvcError {
  override name = "SvcInsufficientFundsError";
}

/**
 * The request input is invalid (`ValidationError`, 400/409/413/415 from the service), or the client refused
 * it before sending (status 0, e.g. reason `invalid_amount`).
 * @example
 * await wallet.send({ to, amount: Number.NaN, chain: "base" }).catch((e) => e instanceof SvcValidationError);
 */
export class SvcValidationError extends SvcError {
  override name = "SvcValidationError";
}

/**
 * Too many requests (429 `RateLimitExceeded`), raised once the client's retries are spent. `retryAfter` is
 * the service's `Retry-After` in seconds.
 * @example
 * if (error instanceof SvcRateLimitError) await new Promise((r) => setTimeout(r, error.retryAfter * 1000));
 */
export class SvcRateLimitError extends SvcError {
  override name = "SvcRateLimitError";
  /** Seconds to wait before the next request, from the `Retry-After` header (0 when absent). */
  readonly retryAfter: number;
  constructor(init: SvcErrorInit & { retryAfter: number }) {
    super(init);
    this.retryAfter = init.retryAfter;
  }
}

/**
 * The service failed (`InternalError`, 5xx), e.g. reason `chain_unavailable` or `broadcast_rejected`.
 * @example
 * if (error instanceof SvcInternalError) console.error("service fault, request", error.requestId);
 */
export class SvcInternalError extends SvcError {
  override name = "SvcInternalError";
}

/**
 * No answer from the service: connection refused or dropped, a timeout (`reason: "timeout"`), or the
 * caller's `AbortSignal` (`reason: "aborted"`), after the client's retries.
 * @example
 * if (error instanceof SvcConnectionError) console.error("service unreachable:", error.message);
 */
export class SvcConnectionError extends SvcError {
  override name = "SvcConnectionError";
}

/**
 * The authorization daemon denied the spend (`approved: false`, a policy verdict). Nothing was submitted.
 * `decisionId` names the verdict in the daemon's audit chain.
 * @example
 * try {
 *   await wallet.send({ to, amount: 5, chain: "base" });
 * } catch (error) {
 *   if (error instanceof SvcSpendDeniedError) console.log(error.reason, error.decisionId);
 * }
 */
export class SvcSpendDeniedError extends SvcError {
  override name = "SvcSpendDeniedError";
  readonly decisionId: string;
  override readonly reason: string;
  constructor(reason: string, decisionId: string) {
    super({
      code: "SpendDenied",
      status: 0,
      message: `Spend denied by the authorization daemon: ${reason}`,
      reason,
    });
    this.reason = reason;
    this.decisionId = decisionId;
  }
}

/**
 * The authorization daemon could not give a verdict: unreachable, spend authorization not enabled,
 * capability missing, misconfigured, or a malformed answer. Nothing was submitted. `statusCode` is the
 * daemon's HTTP status (undefined when there was no answer); `reason` the daemon's error code
 * (`spend_authz_disabled`, `missing_capability`, …) or the client's (`unreachable`, `malformed_response`,
 * `misconfigured`).
 * @example
 * if (error instanceof SvcAuthzError) console.error(`daemon problem (${error.statusCode}):`, error.message);
 */
export class SvcAuthzError extends SvcError {
  override name = "SvcAuthzError";
  readonly statusCode: number | undefined;
  constructor(message: string, options: { statusCode?: number; reason: string; cause?: unknown }) {
    super({
      code: "AuthzError",
      status: 0,
      message,
      reason: options.reason,
      ...(options.cause === undefined ? {} : { cause: options.cause }),
    });
    this.statusCode = options.statusCode;
  }
}

/**
 * A paid resource refused the payment it was sent: it answered HTTP 402 again. `serverReason` is the
 * server's reason (the receipt's `errorReason`, or the new challenge's `error`); `transaction` the wallet's
 * `x402` transaction, which the service completes (`failed`, its amount released, unless it settled after all).
 * @example
 * try {
 *   await wallet.fetch(url);
 * } catch (error) {
 *   if (error instanceof SvcPaymentRejectedError) console.log(error.serverReason, error.transaction?.status);
 * }
 */
export class SvcPaymentRejectedError extends SvcError {
  override name = "SvcPaymentRejectedError";
  readonly serverReason: string;
  readonly transaction: Transaction | undefined;
  constructor(serverReason: string, transaction: Transaction | undefined, url: string) {
    super({
      code: "PaymentRejected",
      status: 402,
      message: `${url} refused the payment: ${serverReason}`,
      reason: "payment_rejected",
      details: { serverReason, ...(transaction ? { transactionId: transaction.id } : {}) },
    });
    this.serverReason = serverReason;
    this.transaction = transaction;
  }
}

/**
 * A webhook that does not verify (`verifyWebhook`): `reason` is `missing_headers`, `invalid_signature`,
 * `timestamp_too_old`, `timestamp_too_new` or `invalid_payload`. Answer the sender 400 and ignore the body.
 * @example
 * try {
 *   event = verifyWebhook(body, request.headers, secret);
 * } catch (error) {
 *   if (error instanceof SvcWebhookVerificationError) return reply.code(400).send();
 *   throw error;
 * }
 */
export class SvcWebhookVerificationError extends SvcError {
  override name = "SvcWebhookVerificationError";
  constructor(message: string, reason: string, cause?: unknown) {
    super({
      code: "WebhookVerificationError",
      status: 0,
      message,
      reason,
      ...(cause === undefined ? {} : { cause }),
    });
  }
}

/**
 * `wallet.waitForTransaction` reached its deadline first (`reason: "wait_timeout"`); `transaction` is the
 * last state read. The transaction itself goes on.
 * @example
 * try {
 *   await wallet.waitForTransaction(tx.id, { timeoutMs: 30_000 });
 * } catch (error) {
 *   if (error instanceof SvcWaitTimeoutError) console.log("still", error.transaction.status);
 * }
 */
export class SvcWaitTimeoutError extends SvcError {
  override name = "SvcWaitTimeoutError";
  readonly transaction: Transaction;
  constructor(transaction: Transaction, waitedForMs: number, wanted: string) {
    super({
      code: "WaitTimeout",
      status: 0,
      message: `Transaction ${transaction.id} was still ${transaction.status} after ${waitedForMs} ms (waiting for ${wanted})`,
      reason: "wait_timeout",
      details: { transactionId: transaction.id, status: transaction.status },
    });
    this.transaction = transaction;
  }
}

const BY_CODE: Record<string, new (init: SvcErrorInit) => SvcError> = {
  Unauthorized: SvcUnauthorizedError,
  Forbidden: SvcForbiddenError,
  NotFound: SvcNotFoundError,
  PolicyViolation: SvcPolicyViolationError,
  InsufficientFunds: SvcInsufficientFundsError,
  ValidationError: SvcValidationError,
  InternalError: SvcInternalError,
};

/**
 * Builds the {@link SvcError} subclass for a service error answer ({@link ServiceErrorBody}). A body that is
 * not of that shape gives a plain {@link SvcError} with code `HttpError` (or {@link SvcInternalError} for a
 * 5xx).
 * @example
 * const response = await fetch(`${baseUrl}/wallets/wal_x`, { headers });
 * if (!response.ok) throw errorFromResponse(response.status, await response.json(), response.headers);
 */
export function errorFromResponse(status: number, body: unknown, headers?: Headers): SvcError {
  const headerRequestId = headers?.get("x-request-id") ?? undefined;
  const error = (body as { error?: unknown } | null)?.error;
  if (error === null || typeof error !== "object") {
    const init: SvcErrorInit = {
      code: status >= 500 ? "InternalError" : "HttpError",
      status,
      message: `The service answered HTTP ${status} without an error body`,
      requestId: headerRequestId,
    };
    if (status === 429)
      return new SvcRateLimitError({
        ...init,
        code: "RateLimitExceeded",
        retryAfter: retryAfterSeconds(headers),
      });
    return status >= 500 ? new SvcInternalError(init) : new SvcError(init);
  }
  const e = error as Record<string, unknown>;
  const init: SvcErrorInit = {
    code: typeof e.code === "string" ? e.code : "HttpError",
    status,
    message: typeof e.message === "string" ? e.message : `HTTP ${status}`,
    requestId: typeof e.requestId === "string" ? e.requestId : headerRequestId,
    reason: typeof e.reason === "string" ? e.reason : undefined,
    details:
      e.details !== null && typeof e.details === "object" && !Array.isArray(e.details)
        ? (e.details as Record<string, unknown>)
        : undefined,
  };
  if (init.code === "RateLimitExceeded" || status === 429) {
    return new SvcRateLimitError({ ...init, retryAfter: retryAfterSeconds(headers) });
  }
  const Class = BY_CODE[init.code] ?? (status >= 500 ? SvcInternalError : SvcError);
  return new Class(init);
}

/**
 * `Retry-After` in seconds: a number of seconds or an HTTP date; 0 when absent or unreadable.
 * @example
 * retryAfterSeconds(new Headers({ "retry-after": "7" })); // 7
 */
export function retryAfterSeconds(headers: Headers | undefined): number {
  const value = headers?.get("retry-after");
  if (value === null || value === undefined || value.trim() === "") return 0;
  if (/^\d+(\.\d+)?$/.test(value.trim())) return Number(value.trim());
  const date = Date.parse(value);
  return Number.isNaN(date) ? 0 : Math.max(0, Math.ceil((date - Date.now()) / 1000));
}
