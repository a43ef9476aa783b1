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
 * A binary min-heap by `key`: reservations lapse in the order of their expiry, which is not the order they
 * were made in once the reservation time has changed between them (each decision keeps its own expiry).
 */
export class MinHeap<T> {
  private readonly items: T[] = [];

  constructor(private readonly key: (item: T) => number) {}

  push(item: T): void {
    const items = this.items;
    items.push(item);
    for (let i = items.length - 1; i > 0; ) {
      const parent = (i - 1) >> 1;
      if (this.key(items[parent] as T) <= this.key(item)) break;
      items[i] = items[parent] as T;
      items[parent] = item;
      i = parent;
    }
  }

  peek(): T | undefined {
    return this.items[0];
  }

  /** Removes the least item. */
  shift(): void {
    const items = this.items;
    const last = items.pop();
    if (last === undefined || items.length === 0) return;
    items[0] = last;
    for (let i = 0; ; ) {
      const left = 2 * i + 1;
      const right = left + 1;
      let least = i;
      if (left < items.length && this.key(items[left] as T) < this.key(items[least] as T)) least = left;
      if (right < items.length && this.key(items[right] as T) < this.key(items[least] as T)) least = right;
      if (least === i) return;
      items[i] = items[least] as T;
      items[least] = last;
      i = least;
    }
  }
}

/**
 * What the ledger needs of an approved spend. The decision record itself is passed in, so a decision
 * costs the ledger no object of its own.
 */
export interface Reservation {
  readonly credits: number;
  /** When the reservation lapses if not settled or cancelled by then (ms since the epoch). */
  readonly expiresAt: number;
  /** When it was settled, or null. Set by {@link PayerLedger.settle}. */
  settledAt: number | null;
  /** When it was cancelled, or null. Set by {@link PayerLedger.cancel}. */
  cancelledAt: number | null;
}

/** What a payer has used, in credits, at one instant. */
export interface BudgetUsage {
  /** Approved, neither settled nor cancelled, reservation not yet lapsed. */
  reserved: number;
  /** Settled within the window. */
  settled: number;
  /**
   * Approved, neither settled nor cancelled, reservation lapsed: the money may have been spent, so
   * these count until one window after the lapse.
   */
  expiredUnsettled: number;
}

/** Whether a reservation is still open at `now`: neither settled, cancelled nor lapsed. */
export function isHeld(reservation: Reservation, now: number): boolean {
  return reservation.settledAt === null && reservation.cancelledAt === null && reservation.expiresAt > now;
}

/**
 * Credits of one payer. An approval reserves credits until it is settled, cancelled or its reservation
 * lapses. Fail-closed: a lapsed reservation that was neither settled nor cancelled may still have been
 * spent, so its credits keep counting (as expired-unsettled) for one window after the lapse, unless it
 * is cancelled. Settled credits count for one window from the time of settlement. Usage at any
 * instant is the sum of the three, and the caller admits a spend only while usage plus its credits
 * stays within the budget. Held reservations are kept by expiry, lapsed ones and settlements in the order
 * they lapsed or settled, so expiry is a pop from the front.
 *
 * Time is passed in (milliseconds since the epoch) so that replaying audit rows at their own times
 * rebuilds exactly the state the live daemon had.
 */
export class PayerLedger {
  private reservedCredits = 0;
  private settledCredits = 0;
  private expiredCredits = 0;
  private readonly reservations = new MinHeap<Reservation>((reservation) => reservation.expiresAt);
  private readonly lapsed = new Queue<Reservation>();
  private readonly settlements = new Queue<Reservation>();

  constructor(private readonly windowMs: number) {}

  /** Usage at `now`, after moving lapsed reservations and dropping what left the window. */
  usage(now: number): BudgetUsage {
    this.expire(now);
    return {
      reserved: this.reservedCredits,
      settled: this.settledCredits,
      expiredUnsettled: this.expiredCredits,
    };
  }

  /** Reserves credits for an approved decision made at `at`. */
  reserve(reservation: Reservation, at: number): void {
    this.expire(at);
    this.reservations.push(reservation);
    this.reservedCredits += reservation.credits;
  }

  /**
   * Commits a reservation: its credits count as settled for one window from `at`. Once only; a cancelled
   * one is left alone. The live daemon settles only a held one (it refuses a lapsed one); a replayed
   * settlement is applied as written, even where the reservation time configured now lapsed it first:
   * its credits then move from the expired-unsettled count.
   */
  settle(reservation: Reservation, at: number): void {
    this.expire(at);
    if (reservation.settledAt !== null || reservation.cancelledAt !== null) return;
    if (reservation.expiresAt > at) this.reservedCredits -= reservation.credits;
    else if (reservation.expiresAt + this.windowMs > at) this.expiredCredits -= reservation.credits;
    reservation.settledAt = at;
    this.settlements.push(reservation);
    this.settledCredits += reservation.credits;
  }

  /**
   * Cancels an unsettled reservation at `at` (the spend was never made): its credits stop counting,
   * whether it is still held or already lapsed. Once only; a settled reservation is left alone.
   */
  cancel(reservation: Reservation, at: number): void {
    this.expire(at);
    if (reservation.settledAt !== null || reservation.cancelledAt !== null) return;
    if (reservation.expiresAt > at) this.reservedCredits -= reservation.credits;
    else if (reservation.expiresAt + this.windowMs > at) this.expiredCredits -= reservation.credits;
    reservation.cancelledAt = at;
  }

  private expire(now: number): void {
    for (
      let r = this.reservations.peek();
      r !== undefined && r.expiresAt <= now;
      r = this.reservations.peek()
    ) {
      this.reservations.shift();
      // A settled or cancelled reservation gave its credits back then.
      if (r.settledAt === null && r.cancelledAt === null) {
        this.reservedCredits -= r.credits;
        this.expiredCredits += r.credits;
        this.lapsed.push(r);
      }
    }
    const horizon = now - this.windowMs;
    for (let r = this.lapsed.peek(); r !== undefined && r.expiresAt <= horizon; r = this.lapsed.peek()) {
      this.lapsed.shift();
      // A cancelled or (replayed) settled one stopped counting here then.
      if (r.cancelledAt === null && r.settledAt === null) this.expiredCredits -= r.credits;
    }
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
