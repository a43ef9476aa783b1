/** A FIFO queue over an array with a moving head; amortised O(1) shift. */
export class Queue<T> {
  private items: T[] = [];
  private head = 0;

  push(item: T): void {
    this.items.push(item);
  }

  peek(): T | undefined {
    return this.items[this.head];
  }

  shift(): void {
    this.head++;
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
  }
}

interface Reservation {
  decisionId: string;
  credits: number;
  expiresAt: number;
}

/** What a payer has used, in credits, at one instant. */
export interface BudgetUsage {
  /** Approved, not settled, not yet expired. */
  reserved: number;
  /** Settled within the window. */
  settled: number;
}

/**
 * Credits of one payer. An approval reserves credits until it is settled or until the reservation
 * expires; settled credits count for one window from the time of settlement. Usage at any instant is
 * reserved plus settled, and the caller admits a spend only while usage plus its credits stays within
 * the budget. Both queues are ordered by time, so expiry is a pop from the front.
 *
 * Time is passed in (milliseconds since the epoch) so that replaying audit rows at their own times
 * rebuilds exactly the state the live daemon had.
 */
export class PayerLedger {
  private reservedCredits = 0;
  private settledCredits = 0;
  private readonly live = new Map<string, Reservation>();
  private readonly reservations = new Queue<Reservation>();
  private readonly settlements = new Queue<{ at: number; credits: number }>();

  constructor(
    private readonly windowMs: number,
    private readonly reservationTtlMs: number,
  ) {}

  /** Usage at `now`, after releasing expired reservations and settlements that left the window. */
  usage(now: number): BudgetUsage {
    this.expire(now);
    return { reserved: this.reservedCredits, settled: this.settledCredits };
  }

  /** Reserves credits for an approved decision made at `at`. */
  reserve(decisionId: string, credits: number, at: number): void {
    this.expire(at);
    const reservation = { decisionId, credits, expiresAt: at + this.reservationTtlMs };
    this.live.set(decisionId, reservation);
    this.reservations.push(reservation);
    this.reservedCredits += credits;
  }

  /** Whether the decision's reservation is still held at `now` (neither settled nor expired). */
  holds(decisionId: string, now: number): boolean {
    this.expire(now);
    return this.live.has(decisionId);
  }

  /** Commits a reservation: its credits now count as settled for one window from `at`. */
  settle(decisionId: string, credits: number, at: number): void {
    this.expire(at);
    const reservation = this.live.get(decisionId);
    if (reservation !== undefined) {
      this.live.delete(decisionId);
      this.reservedCredits -= reservation.credits;
    }
    this.settlements.push({ at, credits });
    this.settledCredits += credits;
  }

  private expire(now: number): void {
    for (
      let r = this.reservations.peek();
      r !== undefined && r.expiresAt <= now;
      r = this.reservations.peek()
    ) {
      this.reservations.shift();
      if (this.live.get(r.decisionId) === r) {
        this.live.delete(r.decisionId);
        this.reservedCredits -= r.credits;
      }
    }
    const horizon = now - this.windowMs;
    for (let s = this.settlements.peek(); s !== undefined && s.at <= horizon; s = this.settlements.peek()) {
      this.settlements.shift();
      this.settledCredits -= s.credits;
    }
  }
}
