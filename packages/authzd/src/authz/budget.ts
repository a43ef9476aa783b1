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

/**
 * What the ledger needs of an approved spend. The decision record itself is passed in, so a decision
 * costs the ledger no object of its own.
 */
export interface Reservation {
  readonly credits: number;
  /** When the reservation is released if not settled by then (ms since the epoch). */
  readonly expiresAt: number;
  /** When it was settled, or null. Set by {@link PayerLedger.settle}. */
  settledAt: number | null;
}

/** What a payer has used, in credits, at one instant. */
export interface BudgetUsage {
  /** Approved, not settled, not yet expired. */
  reserved: number;
  /** Settled within the window. */
  settled: number;
}

/** Whether a reservation still holds its credits at `now` (neither settled nor expired). */
export function isHeld(reservation: Reservation, now: number): boolean {
  return reservation.settledAt === null && reservation.expiresAt > now;
}

/**
 * Credits of one payer. An approval reserves credits until it is settled or its reservation expires;
 * settled credits count for one window from the time of settlement. Usage at any instant is reserved
 * plus settled, and the caller admits a spend only while usage plus its credits stays within the
 * budget. Both queues are ordered by time, so expiry is a pop from the front.
 *
 * Time is passed in (milliseconds since the epoch) so that replaying audit rows at their own times
 * rebuilds exactly the state the live daemon had.
 */
export class PayerLedger {
  private reservedCredits = 0;
  private settledCredits = 0;
  private readonly reservations = new Queue<Reservation>();
  private readonly settlements = new Queue<Reservation>();

  constructor(private readonly windowMs: number) {}

  /** Usage at `now`, after releasing expired reservations and settlements that left the window. */
  usage(now: number): BudgetUsage {
    this.expire(now);
    return { reserved: this.reservedCredits, settled: this.settledCredits };
  }

  /** Reserves credits for an approved decision made at `at`. */
  reserve(reservation: Reservation, at: number): void {
    this.expire(at);
    this.reservations.push(reservation);
    this.reservedCredits += reservation.credits;
  }

  /** Commits a reservation: its credits count as settled for one window from `at`. Once only. */
  settle(reservation: Reservation, at: number): void {
    this.expire(at);
    if (reservation.settledAt !== null) return;
    if (isHeld(reservation, at)) this.reservedCredits -= reservation.credits;
    reservation.settledAt = at;
    this.settlements.push(reservation);
    this.settledCredits += reservation.credits;
  }

  private expire(now: number): void {
    for (
      let r = this.reservations.peek();
      r !== undefined && r.expiresAt <= now;
      r = this.reservations.peek()
    ) {
      this.reservations.shift();
      // A settled reservation gave its credits back when it was settled.
      if (r.settledAt === null) this.reservedCredits -= r.credits;
    }
    const horizon = now - this.windowMs;
    for (
      let s = this.settlements.peek();
      s !== undefined && (s.settledAt ?? 0) <= horizon;
      s = this.settlements.peek()
    ) {
      this.settlements.shift();
      this.settledCredits -= s.credits;
    }
  }
}
