import type { AuditLog, HashedRow } from "../audit/log.ts";
import type {
  RowFields,
  SpendCancelledFields,
  SpendConsumedFields,
  SpendDecidedFields,
  SpendReleasedFields,
  SpendSettledFields,
} from "../audit/rows.ts";
import { type VerifyReport, verifyAuditFileParallel } from "../audit/verify.ts";
import { type Config, normalizeFact } from "../internal/config.ts";
import { errors } from "../internal/errors.ts";
import { mintToken, newDecisionId, newReceiptId, tokenSha256 } from "../internal/tokens.ts";
import { isHeld } from "./budget.ts";
import { SpendRateLimiter } from "./rate-limit.ts";
import {
  type AuthzState,
  CAPABILITIES,
  type Capability,
  type Decision,
  type DecisionState,
  decisionState,
  type Identity,
  isCapability,
} from "./state.ts";
import {
  type AuthorizeRequest,
  atomicGreater,
  isDecisionId,
  parseAuthorizeRequest,
  parseCancelRequest,
  parseDecisionReference,
  parseSettleRequest,
} from "./validate.ts";

/** Response of `POST /spend/authorize` (spec 2.10); `reason` only on denial. */
export interface AuthorizeResult {
  kind: "spend_authorized";
  approved: boolean;
  decision_id: string;
  reason?: string;
}

/** Response of `POST /spend/settle`; a repeat for the same decision returns the same receipt. */
export interface SettleResult {
  kind: "spend_settled";
  receipt_id: string;
  decision_id: string;
}

/** Response of `POST /spend/cancel`; a repeat returns the same body (the first cancellation's time). */
export interface CancelResult {
  kind: "spend_cancelled";
  decision_id: string;
  cancelled_at: string;
}

/**
 * Response of `GET /spend/decisions/:id`: the decision's facts, verdict and where it stands now.
 * The wallet service checks a spend against it before signing; these names are its contract.
 */
export interface DecisionView {
  kind: "spend_decision";
  decision_id: string;
  payer: string;
  approved: boolean;
  /** Only on a denial. */
  reason?: string;
  provider: string;
  network: string;
  asset: string;
  amount: string;
  per_call_cap: string;
  credits: number;
  destination: string;
  decided_at: string;
  /** `decided_at` plus the reservation time (for a denial: when it would have lapsed). */
  expires_at: string;
  /** When the wallet service consumed it; only once consumed (and still after settlement or release). */
  consumed_at?: string;
  state: DecisionState;
}

/**
 * Response of `POST /spend/consume`: the decision as the lookup shows it, now `consumed`, with
 * `consumed_at`. The wallet service compares the facts with its spend's before signing.
 */
export type ConsumeResult = Omit<DecisionView, "kind"> & { kind: "spend_consumed"; consumed_at: string };

/** Response of `POST /spend/release`; a repeat returns the same body (the first release's time). */
export interface ReleaseResult {
  kind: "spend_released";
  decision_id: string;
  released_at: string;
}

/** A payer's budget at one instant, as `GET /budgets/:name` shows it. */
export interface BudgetView {
  payer: string;
  budget_credits: number;
  reserved_credits: number;
  settled_credits: number;
  /** Approvals whose reservation lapsed unsettled and uncancelled; they count until one window after. */
  expired_unsettled_credits: number;
  available_credits: number;
  window_seconds: number;
  reservation_ttl_seconds: number;
}

/** One capability grant, as listed. */
export interface GrantView {
  identity: string;
  capability: Capability;
  expires_at: string | null;
  active: boolean;
}

const IDENTITY_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const SETTLED_FACTS = ["provider", "network", "asset", "amount", "credits"] as const;

/**
 * The daemon's decisions. Every change is one audit row: the row is chained (synchronously, so
 * check-and-reserve cannot interleave with another request) and applied to the state through the same
 * `apply` that replays the log on start. The state therefore runs ahead of the disk by the rows being
 * synced, so every answer drawn from it (verdict, receipt, budget, listing, or an error such as
 * `identity_exists`) is held until every row appended so far is durable; rows become durable in chain
 * order, so that covers every row the answer could depend on.
 *
 * Fail-stop: once an audit write or sync has failed, the state may hold rows that are not on disk, so
 * every further answer drawn from it is 503 `audit_unavailable` until a restart rebuilds the state
 * from the file. `onAuditFailure` is called once, when the failure happens.
 */
export class AuthzService {
  private failure: Error | null = null;
  private readonly limiter: SpendRateLimiter | null;
  /** Whether an audit verification runs now. */
  private verifying = false;
  /** The one that follows it, shared by every caller that asked while it ran, and what starts it. */
  private nextVerifying: { report: Promise<VerifyReport>; start(): void } | null = null;

  constructor(
    private readonly config: Config,
    private readonly state: AuthzState,
    private readonly log: AuditLog,
    private readonly auditFile: string,
    private readonly onAuditFailure: (error: Error) => void,
    /** The clock of expiries, budget windows, rate limits and the rows' times (ms since the epoch). */
    private readonly now: () => number = Date.now,
  ) {
    log.onFailure((error) => this.reportFailure(error));
    this.limiter = config.spendRateLimit === null ? null : new SpendRateLimiter(config.spendRateLimit);
  }

  /** The identity whose token hashes to `sha256`, if any. */
  identityForTokenSha256(sha256: string): Identity | undefined {
    return this.state.identityByToken(sha256);
  }

  /**
   * Throws unless the audit log is usable, spend authorization is enabled and `caller` holds
   * `capability` now.
   */
  assertSpendAllowed(caller: Identity, capability: Capability): void {
    this.assertAuditUsable();
    if (!this.config.spendAuthzEnabled) throw errors.spendAuthzDisabled();
    if (!this.state.holds(caller, capability, this.now())) throw errors.missingCapability(capability);
  }

  /**
   * The gate of every `/spend/*` route: {@link assertSpendAllowed}, then one token of the caller's rate
   * limit (429 `rate_limited` with `Retry-After` when it is used up). Call it once per request, before
   * the body is parsed; nothing is audited for a request it refuses.
   *
   * Requests under `wallet.spend.verify` (lookup, consume, release) take no token. The wallet service makes
   * them for every agent's spends under its one identity, so a shared bucket would let one agent sending
   * made-up decision ids fail every other agent's spends. They need no bucket: consume and release each
   * write at most once per decision, whose authorize the payer's own bucket already counted, and a lookup
   * or an unknown id writes nothing.
   */
  admitSpend(caller: Identity, capability: Capability): void {
    this.assertSpendAllowed(caller, capability);
    if (this.limiter === null || capability === "wallet.spend.verify") return;
    const retryAfter = this.limiter.take(caller.name, this.now());
    if (retryAfter > 0) throw errors.rateLimited(retryAfter);
  }

  /** Whether `caller` may read the audit log (the operator always may). */
  canReadAudit(caller: Identity): boolean {
    return this.state.holds(caller, "audit.read", this.now());
  }

  /**
   * Decides one spend for `caller` (the payer). Denies when the amount is over the per-call cap, when
   * an allow-list rejects a fact, or when the payer's budget would be exceeded; approval reserves the
   * credits. Both verdicts are audited and returned with HTTP 200.
   */
  authorize(caller: Identity, body: unknown): Promise<AuthorizeResult> {
    return this.durably(() => this.decide(caller, body));
  }

  private decide(caller: Identity, body: unknown): AuthorizeResult {
    this.assertSpendAllowed(caller, "wallet.spend.authorize");
    const parsed = parseAuthorizeRequest(body);
    if (!parsed.ok) throw errors.invalidBody(parsed.error);
    const request = parsed.value;
    const now = this.now();
    const reason = this.denialReason(caller, request, now);
    const decisionId = newDecisionId();
    const fields: SpendDecidedFields = {
      kind: "spend_authorization_decided",
      provider: request.provider,
      network: request.network,
      asset: request.asset,
      amount: request.amount,
      per_call_cap: request.per_call_cap,
      credits: request.credits,
      destination: request.destination,
      approved: reason === null,
      reason,
      decision_id: decisionId,
      payer: caller.name,
      expires_at: new Date(now + this.config.reservationTtlMs).toISOString(),
    };
    this.append(fields, now);
    return reason === null
      ? { kind: "spend_authorized", approved: true, decision_id: decisionId }
      : { kind: "spend_authorized", approved: false, decision_id: decisionId, reason };
  }

  /**
   * Settles an approved decision of `caller`: the facts must equal the authorized ones, and the
   * reservation must still be held. A repeat returns the first receipt and commits nothing.
   */
  settle(caller: Identity, body: unknown): Promise<SettleResult> {
    return this.durably(() => this.settleNow(caller, body));
  }

  private settleNow(caller: Identity, body: unknown): SettleResult {
    this.assertSpendAllowed(caller, "wallet.spend.settle");
    const parsed = parseSettleRequest(body);
    if (!parsed.ok) throw errors.invalidBody(parsed.error);
    const request = parsed.value;
    const now = this.now();
    const decision = this.state.decision(request.decision_id, now);
    if (decision === undefined || !decision.approved || decision.payer !== caller.name) {
      throw errors.decisionNotFound();
    }
    if (decision.cancelledAt !== null) {
      throw decision.released ? errors.decisionReleased() : errors.decisionCancelled();
    }
    const differing = SETTLED_FACTS.filter((fact) => decision[fact] !== request[fact]);
    if (differing.length > 0) throw errors.settleMismatch(differing);
    if (decision.receiptId !== null) {
      // A repeat. If the first settlement's row is still being synced, `durably` holds this answer
      // until it is on disk, and turns it into 503 if that write fails.
      return {
        kind: "spend_settled",
        receipt_id: decision.receiptId,
        decision_id: request.decision_id,
      };
    }
    if (!this.state.reservationHeld(decision, now)) throw errors.reservationExpired();
    const fields: SpendSettledFields = {
      kind: "spend_settled",
      decision_id: request.decision_id,
      receipt_id: newReceiptId(),
      payer: caller.name,
      provider: request.provider,
      network: request.network,
      asset: request.asset,
      amount: request.amount,
      credits: request.credits,
      tx_sig: request.tx_sig ?? null,
    };
    this.append(fields, now);
    return { kind: "spend_settled", receipt_id: fields.receipt_id, decision_id: request.decision_id };
  }

  /**
   * Cancels an approved, unsettled decision of `caller` whose spend was never made: its credits stop
   * counting (whether the reservation is still held or already lapsed) and it can no longer be
   * settled. A repeat returns the first cancellation and writes nothing. A decision the wallet service
   * consumed is refused (409 `decision_consumed`): the service may have signed its spend, so only the
   * service can say it did not (by releasing it); one it released is 409 `decision_released`.
   */
  cancel(caller: Identity, body: unknown): Promise<CancelResult> {
    return this.durably(() => this.cancelNow(caller, body));
  }

  private cancelNow(caller: Identity, body: unknown): CancelResult {
    this.assertSpendAllowed(caller, "wallet.spend.settle");
    const parsed = parseCancelRequest(body);
    if (!parsed.ok) throw errors.invalidBody(parsed.error);
    const id = parsed.value.decision_id;
    const now = this.now();
    const decision = this.state.decision(id, now);
    if (decision === undefined || !decision.approved || decision.payer !== caller.name) {
      throw errors.decisionNotFound();
    }
    if (decision.settledAt !== null) throw errors.alreadySettled();
    if (decision.released) throw errors.decisionReleased();
    if (decision.consumedAt !== null) throw errors.decisionConsumed();
    if (decision.cancelledAt === null) {
      const fields: SpendCancelledFields = { kind: "spend_cancelled", decision_id: id, payer: caller.name };
      this.append(fields, now);
    }
    return {
      kind: "spend_cancelled",
      decision_id: id,
      cancelled_at: new Date(decision.cancelledAt ?? now).toISOString(),
    };
  }

  /**
   * Any payer's decision (approved or denied) by id, with its state now; for the wallet service
   * (`wallet.spend.verify`). Writes no row. A string that is not shaped like a decision id is simply
   * not found.
   */
  lookupDecision(id: string): Promise<DecisionView> {
    return this.durably(() => {
      const now = this.now();
      const decision = isDecisionId(id) ? this.state.decision(id, now) : undefined;
      if (decision === undefined) throw errors.decisionUnknown();
      return this.view(decision, now);
    });
  }

  /**
   * The wallet service (`caller`, holding `wallet.spend.verify`) takes an approved decision for the one
   * spend it admits, before signing it: in one synchronous step it checks that the decision is approved,
   * neither settled, cancelled, released nor consumed, and its reservation not lapsed, and chains a
   * `spend_consumed` row; a decision whose payer no longer holds `wallet.spend.authorize` (revoked or
   * expired since) is refused too (409 `payer_not_authorized`). So of any number of concurrent consumes and cancels of one decision exactly
   * one wins, and once consumed the payer can no longer cancel it. Not idempotent on purpose: a second
   * consume, even by the same identity, is refused (409 `decision_consumed`), so that two spends carrying
   * one decision can never both pass. A refusal is 409 with a code naming why and the decision's view.
   */
  consume(caller: Identity, body: unknown): Promise<ConsumeResult> {
    return this.durably(() => this.consumeNow(caller, body));
  }

  private consumeNow(caller: Identity, body: unknown): ConsumeResult {
    this.assertSpendAllowed(caller, "wallet.spend.verify");
    const parsed = parseDecisionReference(body);
    if (!parsed.ok) throw errors.invalidBody(parsed.error);
    const id = parsed.value.decision_id;
    const now = this.now();
    const decision = isDecisionId(id) ? this.state.decision(id, now) : undefined;
    if (decision === undefined) throw errors.decisionUnknown();
    const refusal = consumeRefusal(decision, now);
    if (refusal !== null) throw errors.notConsumable(refusal[0], refusal[1], this.view(decision, now));
    // Revoking an identity's authorize capability cuts it off at once: its approvals not yet used go with it.
    const payer = this.state.identities.get(decision.payer);
    if (payer === undefined || !this.state.holds(payer, "wallet.spend.authorize", now)) {
      throw errors.notConsumable(
        "payer_not_authorized",
        `its payer ${decision.payer} no longer holds wallet.spend.authorize`,
        this.view(decision, now),
      );
    }
    const fields: SpendConsumedFields = {
      kind: "spend_consumed",
      decision_id: id,
      payer: decision.payer,
      consumer: caller.name,
    };
    this.append(fields, now);
    return { ...this.view(decision, now), kind: "spend_consumed", consumed_at: new Date(now).toISOString() };
  }

  /**
   * The consumer gives a consumed decision back because the spend was refused before anything was
   * signed: its credits stop counting (as on a cancellation) and it can be neither consumed again nor
   * settled. Only the identity that consumed it may (409 `not_consumed_by_caller` otherwise, also for a
   * decision nobody consumed); a settled one is 409 `already_settled`. A repeat returns the first
   * release and writes nothing.
   */
  release(caller: Identity, body: unknown): Promise<ReleaseResult> {
    return this.durably(() => this.releaseNow(caller, body));
  }

  private releaseNow(caller: Identity, body: unknown): ReleaseResult {
    this.assertSpendAllowed(caller, "wallet.spend.verify");
    const parsed = parseDecisionReference(body);
    if (!parsed.ok) throw errors.invalidBody(parsed.error);
    const id = parsed.value.decision_id;
    const now = this.now();
    const decision = isDecisionId(id) ? this.state.decision(id, now) : undefined;
    if (decision === undefined || !decision.approved) throw errors.decisionUnknown();
    if (decision.consumer !== caller.name) throw errors.notConsumer();
    if (decision.settledAt !== null) throw errors.alreadySettled("released");
    if (!decision.released) {
      const fields: SpendReleasedFields = {
        kind: "spend_released",
        decision_id: id,
        payer: decision.payer,
        consumer: caller.name,
      };
      this.append(fields, now);
    }
    return {
      kind: "spend_released",
      decision_id: id,
      released_at: new Date(decision.cancelledAt ?? now).toISOString(),
    };
  }

  private view(decision: Decision, now: number): DecisionView {
    return {
      kind: "spend_decision",
      decision_id: decision.id,
      payer: decision.payer,
      approved: decision.approved,
      ...(decision.reason === null ? {} : { reason: decision.reason }),
      provider: decision.provider,
      network: decision.network,
      asset: decision.asset,
      amount: decision.amount,
      per_call_cap: decision.perCallCap,
      credits: decision.credits,
      destination: decision.destination,
      decided_at: new Date(decision.decidedAt).toISOString(),
      expires_at: new Date(decision.expiresAt).toISOString(),
      ...(decision.consumedAt === null ? {} : { consumed_at: new Date(decision.consumedAt).toISOString() }),
      state: decisionState(decision, now),
    };
  }

  /**
   * Creates an identity and returns its token; the token is shown once and stored only hashed.
   * `maxPerCallCap` (atomic units) is the highest `per_call_cap` it may ask for; null uses the daemon
   * default `AUTHZD_MAX_PER_CALL_CAP`.
   */
  createIdentity(
    name: string,
    budgetCredits: number | null,
    maxPerCallCap: string | null = null,
  ): Promise<{
    kind: "identity_created";
    name: string;
    token: string;
    budget_credits: number | null;
    max_per_call_cap: string | null;
  }> {
    return this.durably(() => {
      if (!IDENTITY_NAME.test(name)) {
        throw errors.invalidBody("name must be 1-64 characters of letters, digits, '.', '_' or '-'");
      }
      if (this.state.identities.has(name)) throw errors.identityExists(name);
      const token = mintToken("azd");
      this.append(
        {
          kind: "identity_created",
          name,
          token_sha256: tokenSha256(token),
          budget_credits: budgetCredits,
          max_per_call_cap: maxPerCallCap,
        },
        this.now(),
      );
      return {
        kind: "identity_created",
        name,
        token,
        budget_credits: budgetCredits,
        max_per_call_cap: maxPerCallCap,
      };
    });
  }

  /** All identities with their grants (never their tokens). */
  listIdentities(): Promise<
    {
      name: string;
      created_at: string;
      budget_credits: number | null;
      max_per_call_cap: string | null;
      capabilities: GrantView[];
    }[]
  > {
    return this.durably(() =>
      [...this.state.identities.values()].map((identity) => ({
        name: identity.name,
        created_at: identity.createdAt,
        budget_credits: identity.budgetCredits,
        max_per_call_cap: identity.maxPerCallCap,
        capabilities: this.grantsOf(identity),
      })),
    );
  }

  /** Grants `capability` to an identity, optionally until `expiresAt` (ISO 8601). */
  grant(identityName: string, capability: string, expiresAt: string | null): Promise<GrantView> {
    return this.durably(() => this.grantNow(identityName, capability, expiresAt));
  }

  private grantNow(identityName: string, capability: string, expiresAt: string | null): GrantView {
    if (!isCapability(capability)) {
      throw errors.invalidBody(`unknown capability ${capability}; known: ${CAPABILITIES.join(", ")}`);
    }
    let expiry: string | null = null;
    if (expiresAt !== null) {
      const ms = Date.parse(expiresAt);
      if (Number.isNaN(ms)) throw errors.invalidBody("expires_at must be an ISO 8601 timestamp");
      if (ms <= this.now()) throw errors.invalidBody("expires_at must be in the future");
      expiry = new Date(ms).toISOString();
    }
    if (!this.state.identities.has(identityName)) throw errors.identityNotFound(identityName);
    this.append(
      { kind: "capability_granted", identity: identityName, capability, expires_at: expiry },
      this.now(),
    );
    return { identity: identityName, capability, expires_at: expiry, active: true };
  }

  /** Revokes a capability; takes effect for the next request. */
  revoke(identityName: string, capability: string): Promise<void> {
    return this.durably(() => {
      const identity = this.state.identities.get(identityName);
      if (identity === undefined) throw errors.identityNotFound(identityName);
      if (!isCapability(capability) || !identity.grants.has(capability)) {
        throw errors.grantNotFound(identityName, capability);
      }
      this.append({ kind: "capability_revoked", identity: identityName, capability }, this.now());
    });
  }

  /** Grants of one identity, or of all when `identityName` is undefined. */
  listGrants(identityName: string | undefined): Promise<GrantView[]> {
    return this.durably(() => {
      if (identityName === undefined) {
        return [...this.state.identities.values()].flatMap((identity) => this.grantsOf(identity));
      }
      const identity = this.state.identities.get(identityName);
      if (identity === undefined) throw errors.identityNotFound(identityName);
      return this.grantsOf(identity);
    });
  }

  /** The budget of `payer` now. */
  budget(payer: string): Promise<BudgetView> {
    return this.durably(() => {
      const identity = this.state.identities.get(payer);
      if (identity === undefined) throw errors.identityNotFound(payer);
      const usage = this.state.usage(payer, this.now());
      const budget = identity.budgetCredits ?? this.config.defaultBudgetCredits;
      return {
        payer,
        budget_credits: budget,
        reserved_credits: usage.reserved,
        settled_credits: usage.settled,
        expired_unsettled_credits: usage.expiredUnsettled,
        available_credits: Math.max(0, budget - usage.reserved - usage.settled - usage.expiredUnsettled),
        window_seconds: this.config.budgetWindowMs / 1000,
        reservation_ttl_seconds: this.config.reservationTtlMs / 1000,
      };
    });
  }

  /** The newest durable audit rows, oldest first. */
  recentAudit(limit: number): HashedRow[] {
    return this.log.recent(limit);
  }

  /**
   * Verifies the log file up to what this daemon has made durable, against the durable head this
   * daemon holds in memory (the head anchor it writes to disk trails it): no durable row may be missing
   * from the end, and the last one must hash to the head (a cut at a row boundary, or a rewritten
   * tail, leaves a chain that is valid on its own).
   *
   * Each verification reads the whole log, on up to 4 threads: callers that ask while one runs share the
   * next, which starts when it ends. So at most one runs at a time, however many ask, and each caller's
   * report covers the log as it stood when the caller asked, at least.
   */
  verifyAudit(): Promise<VerifyReport> {
    if (!this.verifying) return this.startVerifying();
    if (this.nextVerifying === null) {
      let start = () => {};
      const report = new Promise<VerifyReport>((resolve, reject) => {
        start = () => this.startVerifying().then(resolve, reject);
      });
      this.nextVerifying = { report, start };
    }
    return this.nextVerifying.report;
  }

  /** Runs a verification; as it ends, the next one asked for meanwhile starts, with no moment between. */
  private startVerifying(): Promise<VerifyReport> {
    this.verifying = true;
    const report = verifyAuditFileParallel(this.auditFile, {
      limitBytes: this.log.durableBytes,
      anchor: this.log.durableHead,
    });
    const ended = () => {
      this.verifying = false;
      const next = this.nextVerifying;
      this.nextVerifying = null;
      next?.start();
    };
    report.then(ended, ended);
    return report;
  }

  private denialReason(caller: Identity, request: AuthorizeRequest, now: number): string | null {
    const ceiling = caller.maxPerCallCap ?? this.config.maxPerCallCap;
    if (ceiling !== null && atomicGreater(request.per_call_cap, ceiling)) {
      return `per_call_cap ${request.per_call_cap} exceeds the operator ceiling ${ceiling}`;
    }
    if (atomicGreater(request.amount, request.per_call_cap)) {
      return `amount ${request.amount} exceeds per_call_cap ${request.per_call_cap}`;
    }
    const { allow } = this.config;
    const facts = [
      ["provider", request.provider, allow.providers],
      ["network", request.network, allow.networks],
      ["asset", request.asset, allow.assets],
      ["destination", request.destination, allow.destinations],
    ] as const;
    for (const [fact, value, allowed] of facts) {
      if (allowed !== null && !allowed.has(normalizeFact(value))) {
        return `${fact} ${value} is not on the allow-list`;
      }
    }
    const budget = caller.budgetCredits ?? this.config.defaultBudgetCredits;
    const { reserved, settled, expiredUnsettled } = this.state.usage(caller.name, now);
    const used = reserved + settled + expiredUnsettled;
    if (used + request.credits > budget) {
      return `budget exceeded: ${used} of ${budget} credits already reserved, settled or expired unsettled in the current window, this spend needs ${request.credits}`;
    }
    return null;
  }

  /**
   * Runs `decide` against the state (synchronously: it may chain one row), then answers with its
   * result or error only once every row appended so far, its own included, is durable. Refuses at once
   * after an audit failure, and turns any failure while waiting into 503 `audit_unavailable`.
   */
  private async durably<T>(decide: () => T): Promise<T> {
    this.assertAuditUsable();
    let outcome: { ok: true; value: T } | { ok: false; error: unknown };
    try {
      outcome = { ok: true, value: decide() };
    } catch (error) {
      outcome = { ok: false, error };
    }
    try {
      await this.log.whenDurable();
    } catch (error) {
      this.reportFailure(error as Error);
      // The write that failed held this request's row, and may have reached the disk in part.
      throw errors.auditUnavailable(true);
    }
    if (!outcome.ok) throw outcome.error;
    return outcome.value;
  }

  /** Chains one row and applies it to the state; only call it inside `durably`. */
  private append(fields: RowFields, now: number): void {
    let appended: ReturnType<AuditLog["append"]>;
    try {
      appended = this.log.append(fields, new Date(now));
    } catch (error) {
      this.reportFailure(error as Error);
      throw errors.auditUnavailable();
    }
    // Awaited through `whenDurable` (the same promise); a failure surfaces there.
    this.state.apply(appended.row);
  }

  /** 503 once the audit log has failed: the state may hold rows that never reached the disk. */
  private assertAuditUsable(): void {
    const failure = this.failure ?? this.log.failureCause;
    if (failure === null) return;
    this.reportFailure(failure);
    throw errors.auditUnavailable();
  }

  private reportFailure(error: Error): void {
    if (this.failure !== null) return;
    this.failure = error;
    this.onAuditFailure(error);
  }

  private grantsOf(identity: Identity): GrantView[] {
    const now = this.now();
    return [...identity.grants.entries()].map(([capability, expiry]) => ({
      identity: identity.name,
      capability,
      expires_at: expiry === null ? null : new Date(expiry).toISOString(),
      active: expiry === null || expiry > now,
    }));
  }
}

/** Why `decision` cannot be consumed at `now` (a 409 code and a phrase), or null when it can. */
function consumeRefusal(decision: Decision, now: number): [code: string, why: string] | null {
  if (!decision.approved) return ["decision_denied", `it was denied (${decision.reason ?? "denied"})`];
  if (decision.settledAt !== null) return ["already_settled", "it was settled"];
  if (decision.released)
    return ["decision_released", "the wallet service gave it back after a refused spend"];
  if (decision.cancelledAt !== null) return ["decision_cancelled", "it was cancelled"];
  if (decision.consumedAt !== null) return ["decision_consumed", "it was already consumed for a spend"];
  if (!isHeld(decision, now)) {
    return [
      "reservation_expired",
      `its reservation expired at ${new Date(decision.expiresAt).toISOString()}`,
    ];
  }
  return null;
}
