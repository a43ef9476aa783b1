import type { AuditRow } from "../audit/rows.ts";
import { MAX_RESERVATION_TTL_MS } from "../internal/config.ts";
import { type BudgetUsage, isHeld, PayerLedger, Queue, type Reservation } from "./budget.ts";

/** Capabilities an identity can hold. */
export const CAPABILITIES = [
  "wallet.spend.authorize",
  "wallet.spend.settle",
  "wallet.spend.verify",
  "audit.read",
] as const;
export type Capability = (typeof CAPABILITIES)[number];

/** Whether `name` is a capability this daemon knows. */
export function isCapability(name: string): name is Capability {
  return (CAPABILITIES as readonly string[]).includes(name);
}

/** A named caller with its own bearer token. */
export interface Identity {
  name: string;
  tokenSha256: string;
  budgetCredits: number | null;
  /** Highest `per_call_cap` this identity may ask for (atomic units), or null for the daemon default. */
  maxPerCallCap: string | null;
  createdAt: string;
  /** Capability → expiry in ms since the epoch, or null for no expiry. */
  grants: Map<Capability, number | null>;
}

/**
 * A decision (approved or denied), kept for settlement, cancellation and lookup: the facts of the
 * request, the verdict, and for an approval the reservation the payer's ledger holds.
 */
export interface Decision extends Reservation {
  readonly id: string;
  readonly payer: string;
  readonly approved: boolean;
  readonly reason: string | null;
  readonly provider: string;
  readonly network: string;
  readonly asset: string;
  readonly amount: string;
  readonly perCallCap: string;
  readonly credits: number;
  readonly destination: string;
  readonly decidedAt: number;
  receiptId: string | null;
  /** The identity (`wallet.spend.verify`) that consumed it for a spend, or null. */
  consumer: string | null;
  /** When it was consumed, or null. */
  consumedAt: number | null;
  /** True when the consumer gave it back; `cancelledAt` then holds when (its credits stopped counting). */
  released: boolean;
}

/**
 * Where a decision stands at one instant, as `GET /spend/decisions/:id` shows it. `consumed` stays
 * `consumed` past `expires_at`: the wallet service may have signed, so it neither lapses into something
 * cancellable nor stops counting.
 */
export type DecisionState =
  | "approved"
  | "denied"
  | "settled"
  | "cancelled"
  | "released"
  | "consumed"
  | "expired";

/** The state of `decision` at `now`. */
export function decisionState(decision: Decision, now: number): DecisionState {
  if (!decision.approved) return "denied";
  if (decision.settledAt !== null) return "settled";
  if (decision.cancelledAt !== null) return decision.released ? "released" : "cancelled";
  if (decision.consumedAt !== null) return "consumed";
  return decision.expiresAt > now ? "approved" : "expired";
}

/** Neither settled nor cancelled (nor released), whether or not its reservation has lapsed. */
function isOpen(decision: Decision): boolean {
  return decision.settledAt === null && decision.cancelledAt === null;
}

/** Distinct strings kept for sharing; beyond this, strings are stored as they come. */
const INTERN_LIMIT = 10_000;

/**
 * Everything the daemon knows, derived only from audit rows. The live daemon and the start-up replay
 * both change it through {@link AuthzState.apply}, so a restart rebuilds exactly the same state.
 */
export class AuthzState {
  readonly identities = new Map<string, Identity>();
  private readonly byToken = new Map<string, Identity>();
  private readonly decisions = new Map<string, Decision>();
  private readonly ledgers = new Map<string, PayerLedger>();
  /** Decisions in decision order, to forget them. */
  private readonly byDecision = new Queue<Decision>();
  /** Providers, networks, assets and payers repeat across decisions; one copy of each is enough. */
  private readonly strings = new Map<string, string>();

  constructor(
    private readonly budgetWindowMs: number,
    private readonly reservationTtlMs: number,
  ) {}

  /** Applies one row (at its own time) to the state. */
  apply(row: AuditRow): void {
    switch (row.kind) {
      case "identity_created": {
        const identity: Identity = {
          name: row.name,
          tokenSha256: row.token_sha256,
          budgetCredits: row.budget_credits,
          // Rows written before ceilings existed have no such field.
          maxPerCallCap: row.max_per_call_cap ?? null,
          createdAt: row.time,
          grants: new Map(),
        };
        this.identities.set(row.name, identity);
        this.byToken.set(row.token_sha256, identity);
        return;
      }
      case "capability_granted": {
        const expiry = row.expires_at === null ? null : Date.parse(row.expires_at);
        if (isCapability(row.capability))
          this.identities.get(row.identity)?.grants.set(row.capability, expiry);
        return;
      }
      case "capability_revoked":
        if (isCapability(row.capability)) this.identities.get(row.identity)?.grants.delete(row.capability);
        return;
      case "spend_authorization_decided": {
        const at = Date.parse(row.time);
        this.forget(at);
        const decision: Decision = {
          id: row.decision_id,
          payer: this.intern(row.payer),
          approved: row.approved,
          reason: row.reason,
          provider: this.intern(row.provider),
          network: this.intern(row.network),
          asset: this.intern(row.asset),
          amount: row.amount,
          perCallCap: row.per_call_cap,
          credits: row.credits,
          destination: row.destination,
          decidedAt: at,
          expiresAt: row.expires_at === undefined ? at + this.reservationTtlMs : recordedExpiry(row, at),
          settledAt: null,
          cancelledAt: null,
          receiptId: null,
          consumer: null,
          consumedAt: null,
          released: false,
        };
        this.decisions.set(row.decision_id, decision);
        this.byDecision.push(decision);
        if (row.approved) this.ledger(row.payer).reserve(decision, at);
        return;
      }
      case "spend_settled": {
        const decision = this.decisions.get(row.decision_id);
        // Written only for a held reservation, and applied as written: a restart with a shorter
        // reservation time does not judge it lapsed after the fact (a cancel would then give back the
        // credits of a spend that was made). A second row for one decision changes nothing.
        if (decision === undefined || !decision.approved || !isOpen(decision)) return;
        decision.receiptId = row.receipt_id;
        this.ledger(row.payer).settle(decision, Date.parse(row.time));
        return;
      }
      case "spend_cancelled": {
        const decision = this.decisions.get(row.decision_id);
        // The service refuses to cancel a consumed decision; a row saying otherwise changes nothing.
        if (decision === undefined || !decision.approved || decision.consumedAt !== null) return;
        this.ledger(row.payer).cancel(decision, Date.parse(row.time));
        return;
      }
      case "spend_consumed": {
        const decision = this.decisions.get(row.decision_id);
        // Written only for a held, unconsumed reservation, and applied as written (as a settlement is).
        if (decision === undefined || !decision.approved || decision.consumedAt !== null) return;
        if (!isOpen(decision)) return;
        decision.consumer = this.intern(row.consumer);
        decision.consumedAt = Date.parse(row.time);
        return;
      }
      case "spend_released": {
        const decision = this.decisions.get(row.decision_id);
        if (decision === undefined || decision.consumer !== row.consumer) return;
        if (decision.settledAt !== null || decision.cancelledAt !== null) return;
        this.ledger(row.payer).cancel(decision, Date.parse(row.time));
        decision.released = true;
        return;
      }
      case "audit_repaired":
        return;
    }
  }

  /** The identity whose token hashes to `tokenSha256`. */
  identityByToken(tokenSha256: string): Identity | undefined {
    return this.byToken.get(tokenSha256);
  }

  /** Whether `identity` holds `capability` at `now` (granted and not expired). */
  holds(identity: Identity, capability: Capability, now: number): boolean {
    const expiry = identity.grants.get(capability);
    return expiry !== undefined && (expiry === null || expiry > now);
  }

  /**
   * The decision (approved or denied) with this id, if it is still remembered at `now`. Every
   * decision is remembered until its reservation time plus one budget window have passed: by then a
   * settlement (made before the reservation lapsed) has left the window too, and so has a lapsed,
   * unsettled approval, so it no longer affects any budget; forgetting it keeps memory bounded by the
   * decisions of one window (plus one reservation time).
   */
  decision(decisionId: string, now: number): Decision | undefined {
    this.forget(now);
    return this.decisions.get(decisionId);
  }

  /** The payer's usage at `now`. */
  usage(payer: string, now: number): BudgetUsage {
    return this.ledger(payer).usage(now);
  }

  /**
   * Whether the decision's reservation is still held (neither settled, cancelled, released nor lapsed) at
   * `now`. Consumption does not end it: a consumed decision is settled as usual.
   */
  reservationHeld(decision: Decision, now: number): boolean {
    return isHeld(decision, now);
  }

  /**
   * Forgets decisions one budget window after their reservation lapsed, in decision order: one that lapses
   * later (decided under a longer reservation time) keeps those after it a while longer.
   */
  private forget(now: number): void {
    for (
      let d = this.byDecision.peek();
      d !== undefined && d.expiresAt + this.budgetWindowMs <= now;
      d = this.byDecision.peek()
    ) {
      this.byDecision.shift();
      this.decisions.delete(d.id);
    }
  }

  private intern(value: string): string {
    const known = this.strings.get(value);
    if (known !== undefined) return known;
    if (this.strings.size < INTERN_LIMIT) this.strings.set(value, value);
    return value;
  }

  private ledger(payer: string): PayerLedger {
    let ledger = this.ledgers.get(payer);
    if (ledger === undefined) {
      ledger = new PayerLedger(this.budgetWindowMs);
      this.ledgers.set(payer, ledger);
    }
    return ledger;
  }
}

/**
 * A decided row's recorded `expires_at`, which must be a time after the row's own and at most the longest
 * reservation time later: the daemon writes nothing else, and an unreadable or far one would keep a
 * reservation held (and every later decision remembered) for good.
 */
function recordedExpiry(row: { decision_id: string; expires_at?: unknown }, at: number): number {
  const expiry = typeof row.expires_at === "string" ? Date.parse(row.expires_at) : Number.NaN;
  if (!Number.isFinite(expiry) || expiry <= at || expiry - at > MAX_RESERVATION_TTL_MS) {
    throw new Error(
      `the audit row deciding ${row.decision_id} has expires_at ${JSON.stringify(row.expires_at)}, not a time within ${MAX_RESERVATION_TTL_MS / 86_400_000} days after the row's own; refusing to replay it`,
    );
  }
  return expiry;
}
