import type { AuthzSettlementFailureLog } from "./types.ts";

/**
 * Receives each final settlement failure (spec 2.13, 6).
 * @example
 * const logger: AuthzSettlementLogger = (log) => console.error("settle failed", log.decisionId);
 */
export type AuthzSettlementLogger = (log: AuthzSettlementFailureLog) => void;

const defaultLogger: AuthzSettlementLogger = (log) => {
  console.warn(
    `svc: settlement of decision ${log.decisionId} failed after ${log.attempts} attempt(s): ${log.error}`,
    log,
  );
};

let current: AuthzSettlementLogger = defaultLogger;

/**
 * Replaces the settlement logger (process-wide, for every `SvcWallet`).
 * @example
 * setAuthzSettlementLogger((log) => pino.warn(log, "authz settlement failed"));
 */
export function setAuthzSettlementLogger(logger: AuthzSettlementLogger): void {
  if (typeof logger !== "function") throw new TypeError("setAuthzSettlementLogger expects a function");
  current = logger;
}

/**
 * Restores the default settlement logger, which writes with `console.warn`.
 * @example
 * resetAuthzSettlementLogger();
 */
export function resetAuthzSettlementLogger(): void {
  current = defaultLogger;
}

/**
 * Calls the currently registered settlement logger. A logger that throws does not disturb the caller: the
 * payment result and the stored record matter more than the log line.
 * @example
 * logSettlementFailure({ decisionId, provider, network, asset, amount, credits, txHash, error: "timeout", attempts: 4 });
 */
export function logSettlementFailure(log: AuthzSettlementFailureLog): void {
  try {
    current(log);
  } catch {}
}
