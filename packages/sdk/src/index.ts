/**
 * `@svc/sdk`: the client of the Svc wallet service. Runs on Node ≥ 20 and in any runtime with `fetch`;
 * one runtime dependency, `standardwebhooks` (plain JavaScript), for `verifyWebhook`. Node-only extras (the file-backed settlement store) are in `@svc/sdk/node`.
 * @example
 * import { SvcWallet } from "@svc/sdk";
 * const svc = new SvcWallet({ apiKey: process.env.SVC_API_KEY! });
 * @packageDocumentation
 */
export {
  creditsFor,
  decimalFromNumber,
  toAtomic,
  toDecimalAmount,
  usdToAtomicCap,
} from "./amounts.ts";
export { SpendAuthzClient, type SpendAuthzClientOptions } from "./authz/client.ts";
export { DEFAULT_PROVIDER, type GatedSpend, SpendGate } from "./authz/gate.ts";
export {
  type AuthzSettlementLogger,
  logSettlementFailure,
  resetAuthzSettlementLogger,
  setAuthzSettlementLogger,
} from "./authz/logger.ts";
export { MemorySettlementStore } from "./authz/store.ts";
export type {
  AuthzSettlementContext,
  AuthzSettlementFailureLog,
  FailedSettlementRecord,
  FailedSettlementStore,
  SpendAuthorizationResult,
  SpendAuthorizeRequest,
  SpendAuthzConfig,
  SpendCancelOutcome,
  SpendSettleRequest,
  SpendSettleResult,
} from "./authz/types.ts";
export { DEFAULT_BASE_URL, type EventStream, SvcWallet, type SvcWalletOptions } from "./client.ts";
export {
  errorFromResponse,
  type ServiceErrorBody,
  SvcAuthzError,
  SvcConnectionError,
  SvcError,
  type SvcErrorInit,
  SvcForbiddenError,
  SvcInsufficientFundsError,
  SvcInternalError,
  SvcNotFoundError,
  SvcPaymentRejectedError,
  SvcPolicyViolationError,
  SvcRateLimitError,
  SvcSpendDeniedError,
  SvcUnauthorizedError,
  SvcValidationError,
  SvcWaitTimeoutError,
  SvcWebhookVerificationError,
} from "./errors.ts";
export { EVENT_TYPES } from "./event-types.ts";
export { NATIVE_ASSET, type TokenFacts } from "./network.ts";
export type { FetchLike } from "./transport.ts";
export type * from "./types.ts";
export { type TransactionList, Wallet, WalletPolicy } from "./wallet.ts";
export { verifyWebhook, type WebhookHeaders } from "./webhooks.ts";
export {
  type PaidResponse,
  parseX402Challenge,
  type X402Challenge,
  type X402Requirement,
} from "./x402.ts";
