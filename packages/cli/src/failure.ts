import { SvcError } from "@svc/sdk";
import { printable } from "./output.ts";

/**
 * The exit codes of `svc`, one per kind of failure a script may want to tell apart (README "Exit codes").
 * @example
 * process.exitCode = EXIT.policy;
 */
export const EXIT = {
  ok: 0,
  /** Bad arguments or input the service refused as invalid (ValidationError). */
  usage: 1,
  /** No credential, a bad, revoked or expired one, or one without the role (Unauthorized, Forbidden). */
  auth: 2,
  /** The wallet's policy or the authorization daemon refused the spend (PolicyViolation, SpendDenied). */
  policy: 3,
  /** Not enough token or gas (InsufficientFunds). */
  funds: 4,
  /** No such wallet, key or transaction for this credential (NotFound). */
  notFound: 5,
  /** The service could not be reached (connection refused, timeout). */
  network: 6,
  /** The service, the chain or a paid resource failed: 5xx, rate limited, a transaction failed on chain. */
  failed: 7,
  /** A transaction was still pending when `--timeout` ran out (it may yet confirm). */
  timeout: 8,
} as const;

/**
 * A failure the CLI itself detects (bad arguments, a transaction that failed on chain, a wait that ran out):
 * printed as one line and exiting with `exitCode`.
 * @example
 * throw new CliError("--max-per-tx must be a USD amount like 10 or 2.50, or none", EXIT.usage);
 */
export class CliError extends Error {
  override name = "CliError";
  readonly exitCode: number;
  readonly details: Record<string, unknown> | undefined;
  constructor(message: string, exitCode: number, details?: Record<string, unknown>) {
    super(message);
    this.exitCode = exitCode;
    this.details = details;
  }
}

/**
 * A usage error: exit code 1.
 * @example
 * throw usage("policy set needs at least one of --max-per-tx, --daily-limit, …");
 */
export function usage(message: string): CliError {
  return new CliError(message, EXIT.usage);
}

const BY_CODE: Record<string, number> = {
  ValidationError: EXIT.usage,
  Unauthorized: EXIT.auth,
  Forbidden: EXIT.auth,
  PolicyViolation: EXIT.policy,
  SpendDenied: EXIT.policy,
  InsufficientFunds: EXIT.funds,
  NotFound: EXIT.notFound,
  ConnectionError: EXIT.network,
  WaitTimeout: EXIT.timeout,
};

/**
 * The exit code for an error of the SDK (by its `code`), of the CLI, or anything else (7).
 * @example
 * exitCodeOf(new SvcPolicyViolationError({ code: "PolicyViolation", status: 403, message })); // 3
 */
export function exitCodeOf(error: unknown): number {
  if (error instanceof CliError) return error.exitCode;
  if (error instanceof SvcError) {
    return BY_CODE[error.code] ?? EXIT.failed;
  }
  return EXIT.failed;
}

/**
 * The one line a failure prints on stderr: the message, then what identifies it (code, reason, request
 * id). With `json`, that line is `{"error":{…}}` for scripts. `verbose` adds the status, details and the
 * cause, each on a line of its own.
 * @example
 * describeFailure(error, { json: false, verbose: false });
 * // "error: Per-transaction limit of $10.00 exceeded: this spend is $25.00 (PolicyViolation max_per_tx, request req_…)"
 */
export function describeFailure(error: unknown, options: { json: boolean; verbose: boolean }): string {
  const fields = failureFields(error);
  if (options.json) return JSON.stringify({ error: fields });
  // The CLI's own failures need no code beside their message; the service's carry its code and reason.
  const tags = error instanceof SvcError ? [fields.code, fields.reason].filter(Boolean).join(" ") : "";
  const where = [tags, fields.requestId ? `request ${fields.requestId}` : undefined].filter(Boolean);
  // A service not found where it was looked for is most often one started on another port.
  const hint =
    fields.code === "ConnectionError" && fields.reason === "network_error"
      ? "; is the service running there? --base-url or SVC_BASE_URL names another"
      : "";
  // One line, whatever the message holds: it may quote what the service or a paid resource said.
  const lines = [
    `error: ${printable(fields.message)}${hint}${where.length > 0 ? ` (${where.join(", ")})` : ""}`,
  ];
  if (options.verbose) {
    if (fields.status !== undefined) lines.push(`  status: ${fields.status}`);
    if (fields.details !== undefined) lines.push(`  details: ${printable(JSON.stringify(fields.details))}`);
    let cause = error instanceof Error ? error.cause : undefined;
    while (cause !== undefined && cause !== null) {
      lines.push(`  cause: ${printable(cause instanceof Error ? cause.message : String(cause))}`);
      cause = cause instanceof Error ? cause.cause : undefined;
    }
    if (
      !(error instanceof SvcError) &&
      !(error instanceof CliError) &&
      error instanceof Error &&
      error.stack
    ) {
      lines.push(error.stack);
    }
  }
  return lines.join("\n");
}

interface FailureFields {
  code: string;
  message: string;
  reason?: string;
  requestId?: string;
  status?: number;
  details?: Record<string, unknown>;
}

function failureFields(error: unknown): FailureFields {
  if (error instanceof SvcError) {
    return {
      code: error.code,
      message: error.message,
      ...(error.reason === undefined ? {} : { reason: error.reason }),
      ...(error.requestId === undefined ? {} : { requestId: error.requestId }),
      ...(error.status === 0 ? {} : { status: error.status }),
      ...(error.details === undefined ? {} : { details: error.details }),
    };
  }
  if (error instanceof CliError) {
    return {
      code: error.exitCode === EXIT.usage ? "UsageError" : "CliError",
      message: error.message,
      ...(error.details === undefined ? {} : { details: error.details }),
    };
  }
  // A fault of the CLI itself: its message, never a stack trace unless --verbose.
  return { code: "UnexpectedError", message: error instanceof Error ? error.message : String(error) };
}
