/**
 * The rolling 24 h window of a wallet's daily limit: what its spends hold (pending or confirmed), summed
 * from hour buckets kept beside each spend and the rows of the one hour the window starts inside.
 */
import { and, asc, eq, gt, gte, inArray, lt, sql } from "drizzle-orm";
import { spendHours, transactions } from "../internal/db/schema.ts";
import { type Db, namedStatement, readSnapshot, type Tx } from "../internal/db/store.ts";
import { errors } from "../internal/errors.ts";
import { formatUsd } from "../internal/money.ts";
import { getPolicyRow, type PolicyRow } from "./policy.ts";
import { rentDetails, type SpendFacts, spendUsdText } from "./rules.ts";

const DAY_MS = 24 * 60 * 60 * 1000;
const HOUR_MS = 60 * 60 * 1000;

/** The start of the hour bucket a moment falls in (UTC hours, as the migration's backfill counts them). */
const hourOf = (at: Date) => new Date(Math.floor(at.getTime() / HOUR_MS) * HOUR_MS);

/** Spends that hold a reservation: sends and x402 payments waiting for approval, pending or confirmed. */
const holdsReservation = and(
  inArray(transactions.type, ["send", "x402"]),
  inArray(transactions.status, ["pending_approval", "pending", "confirmed"]),
);

/** A wallet's spends that hold a reservation, made strictly after `after`. */
const reservationsSince = (walletId: string, after: Date) =>
  and(eq(transactions.walletId, walletId), holdsReservation, gt(transactions.createdAt, after));

/** A wallet's spends that hold a reservation, made strictly between `after` and `before`. */
const reservationsBetween = (walletId: string, after: Date, before: Date) =>
  and(reservationsSince(walletId, after), lt(transactions.createdAt, before));

/**
 * USD spent in the rolling 24 h before `now`, spends made after `now - 24 h`: whole hours from `spend_hours`,
 * and the rows of the one hour the window starts inside. A window that starts exactly on an hour starts
 * inside it too: that hour's bucket holds a spend made at that very moment, which the window leaves out.
 */
async function windowUsage(db: Db | Tx, walletId: string, now: Date): Promise<bigint> {
  const windowStart = new Date(now.getTime() - DAY_MS);
  const firstWholeHour = new Date(hourOf(windowStart).getTime() + HOUR_MS);
  const [[hours], [edge]] = await Promise.all([
    db
      .select({ used: sql<string>`coalesce(sum(${spendHours.usdMicros}), 0)` })
      .from(spendHours)
      .where(and(eq(spendHours.walletId, walletId), gte(spendHours.hour, firstWholeHour))),
    db
      .select({ used: sql<string>`coalesce(sum(${transactions.usdMicros}), 0)` })
      .from(transactions)
      .where(reservationsBetween(walletId, windowStart, firstWholeHour)),
  ]);
  return BigInt(hours?.used ?? 0) + BigInt(edge?.used ?? 0);
}

/** When the oldest spend in the window leaves it: the earliest moment the limit has room again. */
async function windowResetsAt(db: Db | Tx, walletId: string, now: Date): Promise<Date> {
  const [oldest] = await db
    .select({ createdAt: transactions.createdAt })
    .from(transactions)
    .where(reservationsSince(walletId, new Date(now.getTime() - DAY_MS)))
    .orderBy(asc(transactions.createdAt))
    .limit(1);
  return new Date((oldest?.createdAt ?? now).getTime() + DAY_MS);
}

/** A wallet's rolling 24 h as the daily limit counts it, and the same spends hour by hour. */
export interface WindowSpending {
  windowStart: Date;
  /** USD micros the window holds: the figure the daily limit is checked against. */
  used: bigint;
  /** When the oldest spend leaves the window (now, when there is none). */
  resetsAt: Date;
  /**
   * 24 consecutive hours ending at `now`, oldest first; a spend counts in the hour it was made, and one made
   * after `now` (committed between the caller's reading its clock and this read) in the last, as the limit
   * counts it.
   */
  hours: { start: Date; usdMicros: bigint }[];
}

/**
 * What the daily limit sees of a wallet at `now`: the window's total (the very sum the limit check uses) and
 * the spends it holds, by hour, for a chart.
 * @example const { used, hours } = await windowSpending(db, "wal_…", new Date());
 */
export async function windowSpending(
  db: Db | Tx,
  walletId: string,
  now = new Date(),
): Promise<WindowSpending> {
  const windowStart = new Date(now.getTime() - DAY_MS);
  const [used, resetsAt, rows] = await Promise.all([
    windowUsage(db, walletId, now),
    windowResetsAt(db, walletId, now),
    db
      .select({ createdAt: transactions.createdAt, usdMicros: transactions.usdMicros })
      .from(transactions)
      .where(reservationsSince(walletId, windowStart)),
  ]);
  const hours = Array.from({ length: 24 }, (_, i) => ({
    start: new Date(windowStart.getTime() + i * HOUR_MS),
    usdMicros: 0n,
  }));
  for (const row of rows) {
    if (row.usdMicros === null) continue;
    const index = Math.min(23, Math.floor((row.createdAt.getTime() - windowStart.getTime()) / HOUR_MS));
    (hours[index] as { usdMicros: bigint }).usdMicros += row.usdMicros;
  }
  return { windowStart, used, resetsAt, hours };
}

/**
 * A wallet's daily limit and its window as {@link windowSpending} sees it, read on one snapshot: the limit,
 * the total and the hours it sums agree even while spends are being admitted.
 */
export function dailyLimitStanding(
  db: Db,
  walletId: string,
  now: Date,
): Promise<{ dailyLimitMicros: bigint | null; spending: WindowSpending }> {
  return readSnapshot(db, async (tx) => {
    const [policy, spending] = await Promise.all([
      getPolicyRow(tx, walletId),
      windowSpending(tx, walletId, now),
    ]);
    return { dailyLimitMicros: policy.dailyLimitMicros, spending };
  });
}

/** Adds (or, negative, gives back) a spend's USD to its hour bucket. */
export async function addToHour(db: Db | Tx, walletId: string, at: Date, usdMicros: bigint): Promise<void> {
  await addToHourStatement(db, hourBucketParams(walletId, at, usdMicros));
}

/**
 * The SQL text of {@link addToHour}, its parameters from `$first` in {@link hourBucketParams}' order: what it
 * runs, and what a statement that records a spend embeds (`recordTransaction`).
 */
export function addToHourSql(first: number): string {
  return `INSERT INTO spend_hours (wallet_id, hour, usd_micros) VALUES ($${first}, $${first + 1}, $${first + 2})
    ON CONFLICT (wallet_id, hour) DO UPDATE SET usd_micros = spend_hours.usd_micros + EXCLUDED.usd_micros`;
}

/** The parameters of {@link addToHourSql}: the wallet, the hour `at` falls in, and the USD micros. */
export function hourBucketParams(walletId: string, at: Date, usdMicros: bigint): unknown[] {
  return [walletId, hourOf(at).toISOString(), usdMicros.toString()];
}

const addToHourStatement = namedStatement("add_to_hour", addToHourSql(1));

/**
 * Refuses a spend that would take the rolling 24 h sum past `dailyLimit`. Inside {@link admitSpend} it runs
 * under the policy row's lock, which makes it exact; before that, without the lock, it only answers early.
 * `alreadyReserved`: what the spend itself holds in the window already (one approved after waiting).
 */
export async function checkDailyLimit(
  db: Db | Tx,
  policy: PolicyRow,
  spend: SpendFacts,
  now = new Date(),
  alreadyReserved = 0n,
): Promise<void> {
  if (policy.dailyLimitMicros !== null && spend.usdMicros !== undefined) {
    // A spend approved now already holds its place in the window: it is counted once, as this spend.
    const used = (await windowUsage(db, spend.walletId, now)) - alreadyReserved;
    if (used + spend.usdMicros > policy.dailyLimitMicros) {
      const remaining = policy.dailyLimitMicros > used ? policy.dailyLimitMicros - used : 0n;
      throw errors.policyViolation(
        "daily_limit",
        `Daily limit of $${formatUsd(policy.dailyLimitMicros)} exceeded: $${formatUsd(used)} used in the last 24h, this spend is ${spendUsdText(spend)}`,
        {
          rule: "dailyLimit",
          limit: formatUsd(policy.dailyLimitMicros),
          used: formatUsd(used),
          requested: formatUsd(spend.usdMicros),
          remaining: formatUsd(remaining),
          resetsAt: (await windowResetsAt(db, spend.walletId, now)).toISOString(),
          ...rentDetails(spend),
        },
      );
    }
  }
}

/** What a recorded spend holds in the window at `now`: its USD while it is less than 24 h old, else nothing. */
export function reservedInWindow(spend: { usdMicros: bigint | null; createdAt: Date }, now: Date): bigint {
  return spend.usdMicros !== null && spend.createdAt.getTime() > now.getTime() - DAY_MS
    ? spend.usdMicros
    : 0n;
}
