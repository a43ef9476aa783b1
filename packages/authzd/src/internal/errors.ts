/**
 * An error with an HTTP status, rendered by the one error handler as `{ error, code }`.
 * Messages are written for the client and never contain tokens.
 */
export class HttpError extends Error {
  override readonly name = "HttpError";

  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    /** Extra response headers (e.g. `Retry-After`). */
    readonly headers: Readonly<Record<string, string>> = {},
    /** Extra fields of the body beside `error` and `code` (e.g. the decision a consume refused). */
    readonly extra: Readonly<Record<string, unknown>> = {},
  ) {
    super(message);
  }
}

/**
 * The daemon's error list. Domain and HTTP code throw these; nothing builds an error body by hand.
 *
 * @example
 * throw errors.missingCapability("wallet.spend.settle");
 */
export const errors = {
  unauthorized: () => new HttpError(401, "unauthorized", "missing or invalid bearer token"),
  operatorRequired: () => new HttpError(403, "operator_required", "this endpoint needs the operator token"),
  forbidden: (what: string) => new HttpError(403, "forbidden", what),
  missingCapability: (capability: string) =>
    new HttpError(403, "missing_capability", `the caller does not hold the capability ${capability}`),
  spendAuthzDisabled: () =>
    new HttpError(
      503,
      "spend_authz_disabled",
      "spend authorization is not enabled: start the daemon with SPEND_AUTHZ_ENABLED=1",
    ),
  invalidJson: (detail: string) =>
    new HttpError(400, "invalid_json", `request body is not valid JSON: ${detail}`),
  invalidBody: (detail: string) => new HttpError(400, "invalid_body", detail),
  invalidQuery: (detail: string) => new HttpError(400, "invalid_query", detail),
  invalidPath: (path: string) => new HttpError(400, "invalid_path", `malformed percent-encoding in ${path}`),
  bodyTooLarge: (limit: number) =>
    new HttpError(413, "body_too_large", `request body is larger than ${limit} bytes`),
  unsupportedMediaType: () =>
    new HttpError(
      415,
      "unsupported_media_type",
      "request body must be sent as Content-Type: application/json",
    ),
  routeNotFound: (method: string, path: string) =>
    new HttpError(404, "route_not_found", `no route for ${method} ${path}`),
  methodNotAllowed: (method: string, path: string) =>
    new HttpError(405, "method_not_allowed", `${method} is not allowed on ${path}`),
  decisionNotFound: () =>
    new HttpError(404, "decision_not_found", "no approved decision with this decision_id for this payer"),
  decisionUnknown: () => new HttpError(404, "decision_not_found", "no decision with this decision_id"),
  alreadySettled: (refused: "cancelled" | "released" = "cancelled") =>
    new HttpError(409, "already_settled", `this decision was settled; a settled spend cannot be ${refused}`),
  decisionCancelled: () =>
    new HttpError(409, "decision_cancelled", "this decision was cancelled; it can no longer be settled"),
  decisionConsumed: () =>
    new HttpError(
      409,
      "decision_consumed",
      "the wallet service has consumed this decision for a spend; it can no longer be cancelled (settle it once the payment is broadcast)",
    ),
  decisionReleased: () =>
    new HttpError(
      409,
      "decision_released",
      "the wallet service gave this decision back after refusing its spend; its credits are already free and it can no longer be used",
    ),
  notConsumer: () =>
    new HttpError(
      409,
      "not_consumed_by_caller",
      "this decision is not consumed by the calling identity; only its consumer may release it",
    ),
  /**
   * A decision that cannot be consumed: `code` says why (`decision_denied`, `decision_cancelled`,
   * `decision_released`, `decision_consumed`, `already_settled`, `reservation_expired`), and the body
   * carries the decision as the lookup shows it.
   */
  notConsumable: (code: string, why: string, decision: unknown) =>
    new HttpError(409, code, `this decision cannot be consumed: ${why}`, {}, { decision }),
  rateLimited: (retryAfterSeconds: number) =>
    new HttpError(
      429,
      "rate_limited",
      `too many /spend requests from this identity; retry after ${retryAfterSeconds} s`,
      { "retry-after": String(retryAfterSeconds) },
    ),
  settleMismatch: (fields: string[]) =>
    new HttpError(
      409,
      "settle_mismatch",
      `settlement does not match the authorized decision: ${fields.join(", ")} differ${fields.length === 1 ? "s" : ""}`,
    ),
  reservationExpired: () =>
    new HttpError(
      409,
      "reservation_expired",
      "the reservation of this decision expired before settlement; it keeps counting against the budget unless it is cancelled",
    ),
  identityExists: (name: string) => new HttpError(409, "identity_exists", `identity ${name} already exists`),
  identityNotFound: (name: string) => new HttpError(404, "identity_not_found", `no identity named ${name}`),
  grantNotFound: (name: string, capability: string) =>
    new HttpError(404, "grant_not_found", `identity ${name} does not hold ${capability}`),
  /**
   * The audit log could not be written. `mayBeRecorded`: this request's row was in the write that failed,
   * which may have reached the disk in part; a restart replays whatever did.
   */
  auditUnavailable: (mayBeRecorded = false) =>
    new HttpError(
      503,
      "audit_unavailable",
      mayBeRecorded
        ? "the audit log could not be written; this request's verdict may have reached it before the failure, and then counts once authzd restarts (ask for a new one, and cancel the old if it shows)"
        : "the audit log could not be written; no verdict was recorded",
    ),
  internal: () => new HttpError(500, "internal", "internal error"),
};
