import type { AuditRow } from "../audit/rows.ts";
import { type BudgetUsage, isHeld, PayerLedger, Queue, type Reservation } from "./budget.ts";

/** Capabilities an identity can hold. */
export const CAPABILITIES = ["wallet.spend.authorize", "wallet.spend.settle", "audit.read"] as const;
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
  createdAt: string;
  /** Capability → expiry in ms since the epoch, or null for no expiry. */
  grants: Map<Capability, number | null>;
}

/**
 * An approved decision, kept for settlement: only the facts a settlement must match, and the
 * reservation the payer's ledger holds. Deliberately small; the audit row has everything else.
 */
export interface ApprovedDecision extends Reservation {
  readonly id: string;
  readonly payer: string;
  readonly provider: string;
  readonly network: string;
  readonly asset: string;
  readonly amount: string;
  readonly credits: number;
  readonly decidedAt: number;
  receiptId: string | null;
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
  private readonly approved = new Map<string, ApprovedDecision>();
  private readonly ledgers = new Map<string, PayerLedger>();
  /** Approved decisions in decision order, to forget the unsettled ones. */
  private readonly byDecision = new Queue<ApprovedDecision>();
  /** Settled decisions in settlement order, to forget them. */
  private readonly bySettlement = new Queue<ApprovedDecision>();
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
        if (!row.approved) return;
        const at = Date.parse(row.time);
        this.forget(at);
        const decision: ApprovedDecision = {
          id: row.decision_id,
          payer: this.intern(row.payer),
          provider: this.intern(row.provider),
          network: this.intern(row.network),
          asset: this.intern(row.asset),
          amount: row.amount,
          credits: row.credits,
          decidedAt: at,
          expiresAt: at + this.reservationTtlMs,
          settledAt: null,
          receiptId: null,
        };
        this.approved.set(row.decision_id, decision);
        this.byDecision.push(decision);
        this.ledger(row.payer).reserve(decision, at);
        return;
      }
      case "spend_settled": {
        const decision = this.approved.get(row.decision_id);
        if (decision === undefined || decision.receiptId !== null) return;
        const at = Date.parse(row.time);
        decision.receiptId = row.receipt_id;
        this.ledger(row.payer).settle(decision, at);
        this.bySettlement.push(decision);
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
   * The approved decision with this id, if it is still remembered at `now`. A settled decision is
   * remembered (for idempotent repeats) for one budget window after settlement; an unsettled one for
   * its reservation time plus one window (so a late settlement is told the reservation expired).
   * After that it no longer affects any budget, and forgetting it keeps memory bounded by the window.
   */
  decision(decisionId: string, now: number): ApprovedDecision | undefined {
    this.forget(now);
    return this.approved.get(decisionId);
  }

  /** The payer's usage at `now`. */
  usage(payer: string, now: number): BudgetUsage {
    return this.ledger(payer).usage(now);
  }

  /** Whether the decision's reservation is still held (neither settled nor expired) at `now`. */
  reservationHeld(decision: ApprovedDecision, now: number): boolean {
    return isHeld(decision, now);
  }

  private forget(now: number): void {
    const window = this.budgetWindowMs;
    for (
      let d = this.byDecision.peek();
      d !== undefined && d.expiresAt + window <= now;
      d = this.byDecision.peek()
    ) {
      this.byDecision.shift();
      if (d.settledAt === null) this.approved.delete(d.id);
    }
    for (
      let d = this.bySettlement.peek();
      d !== undefined && (d.settledAt ?? 0) + window <= now;
      d = this.bySettlement.peek()
    ) {
      this.bySettlement.shift();
      this.approved.delete(d.id);
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
