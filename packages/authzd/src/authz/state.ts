import type { AuditRow, SpendDecidedFields, SpendSettledFields } from "../audit/rows.ts";
import { type BudgetUsage, PayerLedger, Queue } from "./budget.ts";

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

/** An approved decision, kept for settlement. */
export interface ApprovedDecision {
  row: SpendDecidedFields;
  decidedAt: number;
  settlement: SpendSettledFields | null;
}

interface Forget {
  at: number;
  decisionId: string;
}

/**
 * Everything the daemon knows, derived only from audit rows. The live daemon and the start-up replay
 * both change it through {@link AuthzState.apply}, so a restart rebuilds exactly the same state.
 */
export class AuthzState {
  readonly identities = new Map<string, Identity>();
  private readonly byToken = new Map<string, Identity>();
  private readonly approved = new Map<string, ApprovedDecision>();
  private readonly ledgers = new Map<string, PayerLedger>();
  /** When unsettled decisions may be forgotten, in decision order. */
  private readonly forgetUnsettled = new Queue<Forget>();
  /** When settled decisions may be forgotten, in settlement order. */
  private readonly forgetSettled = new Queue<Forget>();

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
        const { seq: _seq, prev: _prev, time: _time, ...fields } = row;
        this.approved.set(row.decision_id, { row: fields, decidedAt: at, settlement: null });
        this.ledger(row.payer).reserve(row.decision_id, row.credits, at);
        this.forgetUnsettled.push({
          at: at + this.reservationTtlMs + this.budgetWindowMs,
          decisionId: row.decision_id,
        });
        return;
      }
      case "spend_settled": {
        const decision = this.approved.get(row.decision_id);
        if (decision === undefined || decision.settlement !== null) return;
        const { seq: _seq, prev: _prev, time: _time, ...fields } = row;
        decision.settlement = fields;
        const at = Date.parse(row.time);
        this.ledger(row.payer).settle(row.decision_id, row.credits, at);
        this.forgetSettled.push({ at: at + this.budgetWindowMs, decisionId: row.decision_id });
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

  /** Whether the decision's reservation is still held (not expired) at `now`. */
  reservationHeld(payer: string, decisionId: string, now: number): boolean {
    return this.ledger(payer).holds(decisionId, now);
  }

  private forget(now: number): void {
    for (
      let f = this.forgetUnsettled.peek();
      f !== undefined && f.at <= now;
      f = this.forgetUnsettled.peek()
    ) {
      this.forgetUnsettled.shift();
      if (this.approved.get(f.decisionId)?.settlement === null) this.approved.delete(f.decisionId);
    }
    for (let f = this.forgetSettled.peek(); f !== undefined && f.at <= now; f = this.forgetSettled.peek()) {
      this.forgetSettled.shift();
      this.approved.delete(f.decisionId);
    }
  }

  private ledger(payer: string): PayerLedger {
    let ledger = this.ledgers.get(payer);
    if (ledger === undefined) {
      ledger = new PayerLedger(this.budgetWindowMs, this.reservationTtlMs);
      this.ledgers.set(payer, ledger);
    }
    return ledger;
  }
}
