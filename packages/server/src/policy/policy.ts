import { eq } from "drizzle-orm";
import { z } from "zod";
import { recordEvent } from "../events/events.ts";
import { walletPolicies, wallets } from "../internal/db/schema.ts";
import type { Db, Tx } from "../internal/db/store.ts";
import { errors } from "../internal/errors.ts";
import { InexactNumber } from "../internal/exact-json.ts";
import { formatUnits, formatUsd, parseUnitsStrict, USD_DECIMALS } from "../internal/money.ts";

/**
 * A USD amount on the wire: a decimal string or a JSON number, at most 6 decimals, parsed exactly into
 * micro-dollars. `null` means "no bound".
 */
export const usdAmountSchema = z
  .union([z.string(), z.number(), z.instanceof(InexactNumber)])
  .transform((value, ctx) => {
    if (value instanceof InexactNumber) {
      ctx.addIssue({
        code: "custom",
        message: `the JSON number ${value.source.slice(0, 40)} is not exact; send the amount as a decimal string`,
      });
      return z.NEVER;
    }
    const text = typeof value === "number" ? String(value) : value;
    const micros = parseUnitsStrict(text, USD_DECIMALS);
    // Stored as numeric(38, 0): a bound of 10^26 dollars is more than enough, and never overflows.
    if (micros === undefined || micros >= 10n ** 32n || /e/i.test(text)) {
      ctx.addIssue({ code: "custom", message: "must be a non-negative USD amount with at most 6 decimals" });
      return z.NEVER;
    }
    return micros;
  })
  .meta({ type: "string", description: 'USD amount as a decimal string, e.g. "50.00"', example: "50.00" });

/** The policy fields a client may set, at wallet creation or by PATCH. */
export const policyInputSchema = z.strictObject({
  maxPerTx: usdAmountSchema.nullable().optional(),
  dailyLimit: usdAmountSchema.nullable().optional(),
  alertAbove: usdAmountSchema.nullable().optional(),
  approvalAbove: usdAmountSchema
    .nullable()
    .optional()
    .meta({ description: "spends above this (USD) wait for an admin's approval; null = none" }),
  whitelist: z.array(z.string().min(1).max(255)).max(1000).optional(),
  requireSpendAuthorization: z
    .boolean()
    .optional()
    .meta({ description: "refuse spends without a decision verified with the authorization daemon" }),
});
export type PolicyInput = z.infer<typeof policyInputSchema>;

/** The policy resource as api.md shows it. */
export interface PolicyView {
  walletId: string;
  maxPerTx: string | null;
  dailyLimit: string | null;
  whitelist: string[];
  alertAbove: string | null;
  approvalAbove: string | null;
  requireSpendAuthorization: boolean;
  status: "active" | "paused";
  updatedAt: string;
}

const usd = (micros: bigint | null) => (micros === null ? null : formatUnits(micros, USD_DECIMALS));

/** The row a new wallet's policy starts from. */
export function initialPolicyRow(walletId: string, input: PolicyInput | undefined) {
  return {
    walletId,
    maxPerTxMicros: input?.maxPerTx ?? null,
    dailyLimitMicros: input?.dailyLimit ?? null,
    alertAboveMicros: input?.alertAbove ?? null,
    approvalAboveMicros: input?.approvalAbove ?? null,
    whitelist: input?.whitelist ?? [],
    requireSpendAuthorization: input?.requireSpendAuthorization ?? false,
    status: "active" as const,
  };
}

export type PolicyRow = typeof walletPolicies.$inferSelect;

/** Reads a wallet's policy (the caller has already checked the wallet belongs to the account). */
export async function getPolicy(db: Db, walletId: string): Promise<PolicyView> {
  return toPolicyView(await getPolicyRow(db, walletId));
}

/** The stored policy row, for the spend checks. */
export async function getPolicyRow(db: Db | Tx, walletId: string): Promise<PolicyRow> {
  const [row] = await db.select().from(walletPolicies).where(eq(walletPolicies.walletId, walletId));
  if (!row) throw new Error(`wallet ${walletId} has no policy row`);
  return row;
}

/** Who asks for a policy change: whether they may loosen it, and how a refusal names their credential. */
export interface PolicyChanger {
  mayLoosen: boolean;
  credential: string;
}

/**
 * Changes the given fields of a wallet's policy; fields left out keep their value, `null` removes a bound.
 * A change that loosens the policy (see {@link loosenings}) is refused with Forbidden unless the changer may
 * loosen it; the check and the write happen under the policy row's lock, so a concurrent change by the
 * owner cannot turn an agent's tightening into a loosening.
 */
export async function updatePolicy(
  db: Db,
  walletId: string,
  input: PolicyInput,
  changer: PolicyChanger,
): Promise<PolicyView> {
  return db.transaction(async (tx) => {
    const current = await lockPolicyRow(tx, walletId);
    await refuseLoosening(tx, walletId, loosenings(current, input), changer);
    const set: Partial<typeof walletPolicies.$inferInsert> = { updatedAt: new Date() };
    if (input.maxPerTx !== undefined) set.maxPerTxMicros = input.maxPerTx;
    if (input.dailyLimit !== undefined) set.dailyLimitMicros = input.dailyLimit;
    if (input.alertAbove !== undefined) set.alertAboveMicros = input.alertAbove;
    if (input.approvalAbove !== undefined) set.approvalAboveMicros = input.approvalAbove;
    if (input.whitelist !== undefined) set.whitelist = input.whitelist;
    if (input.requireSpendAuthorization !== undefined)
      set.requireSpendAuthorization = input.requireSpendAuthorization;
    return writePolicy(tx, walletId, set);
  });
}

/** Pauses or resumes all spending from a wallet; resuming is a loosening. */
export async function setPolicyStatus(
  db: Db,
  walletId: string,
  status: "active" | "paused",
  changer: PolicyChanger,
): Promise<PolicyView> {
  return db.transaction(async (tx) => {
    const current = await lockPolicyRow(tx, walletId);
    if (current.status === "paused" && status === "active")
      await refuseLoosening(tx, walletId, ["Resuming spending"], changer);
    return writePolicy(tx, walletId, { status, updatedAt: new Date() });
  });
}

/** Writes a change to a locked policy row, with its `policy.updated` event. */
async function writePolicy(
  tx: Tx,
  walletId: string,
  set: Partial<typeof walletPolicies.$inferInsert>,
): Promise<PolicyView> {
  const [row] = await tx
    .update(walletPolicies)
    .set(set)
    .where(eq(walletPolicies.walletId, walletId))
    .returning();
  if (!row) throw new Error(`wallet ${walletId} has no policy row`);
  const view = toPolicyView(row);
  await recordEvent(tx, { walletId }, "policy.updated", view);
  return view;
}

/**
 * Reads a wallet's policy row under a row lock (FOR UPDATE), as policy changes and archiving do; a spend's
 * admission locks the same row (lockSpendingPolicy), so none of them interleave.
 */
export async function lockPolicyRow(tx: Tx, walletId: string): Promise<PolicyRow> {
  const [row] = await tx
    .select()
    .from(walletPolicies)
    .where(eq(walletPolicies.walletId, walletId))
    .for("update");
  if (!row) throw new Error(`wallet ${walletId} has no policy row`);
  return row;
}

/**
 * Refuses a loosening on an archived wallet (like a send from it, whoever asks; tightening stays allowed),
 * then one the changer may not make. Called under the policy row's lock, which archiving also takes: the
 * status read here is the one that holds when the change commits.
 */
async function refuseLoosening(
  tx: Tx,
  walletId: string,
  changes: string[],
  changer: PolicyChanger,
): Promise<void> {
  if (changes.length === 0) return;
  const [wallet] = await tx.select({ status: wallets.status }).from(wallets).where(eq(wallets.id, walletId));
  if (wallet?.status !== "active") throw errors.walletArchived(walletId);
  if (changer.mayLoosen) return;
  // "Removing maxPerTx ($5.00) and raising dailyLimit from $50.00 to $90.00 need an admin credential"
  const last = changes.at(-1) ?? "";
  const sentence = changes.length === 1 ? last : `${changes.slice(0, -1).join(", ")} and ${last}`;
  const action = `${sentence.charAt(0).toUpperCase()}${sentence.slice(1)}`;
  throw errors.insufficientRole("admin", action, changer.credential, changes.length > 1);
}

/**
 * The parts of `input` that would let the wallet spend more, to more places, or with less oversight than
 * `current` allows, each as a short phrase starting in lower case. Setting or lowering a bound, narrowing a non-empty whitelist
 * (never to empty, which allows any recipient), starting a whitelist where there was none, and requiring
 * spend authorizations are tightenings; everything else that changes a value loosens.
 */
export function loosenings(current: PolicyRow, input: PolicyInput): string[] {
  const changes: string[] = [];
  const bound = (name: string, was: bigint | null, next: bigint | null | undefined) => {
    if (next === undefined || was === null) return;
    if (next === null) changes.push(`removing ${name} ($${formatUsd(was)})`);
    else if (next > was) changes.push(`raising ${name} from $${formatUsd(was)} to $${formatUsd(next)}`);
  };
  bound("maxPerTx", current.maxPerTxMicros, input.maxPerTx);
  bound("dailyLimit", current.dailyLimitMicros, input.dailyLimit);
  bound("alertAbove", current.alertAboveMicros, input.alertAbove);
  bound("approvalAbove", current.approvalAboveMicros, input.approvalAbove);
  if (input.whitelist !== undefined && current.whitelist.length > 0) {
    if (input.whitelist.length === 0) changes.push("emptying the whitelist (which allows any recipient)");
    else {
      const added = input.whitelist.filter(
        (entry) => !current.whitelist.some((kept) => sameRecipient(kept, entry)),
      );
      if (added.length > 0) changes.push(`adding ${added.join(", ")} to the whitelist`);
    }
  }
  if (current.requireSpendAuthorization && input.requireSpendAuthorization === false)
    changes.push("turning off requireSpendAuthorization");
  return changes;
}

/** Whitelist matching: EVM addresses and hostnames compare without case; Solana addresses (base58) exactly. */
export function sameRecipient(entry: string, candidate: string): boolean {
  const caseless = (value: string) => value.startsWith("0x") || value.includes(".");
  if (caseless(entry) && caseless(candidate)) return entry.toLowerCase() === candidate.toLowerCase();
  return entry === candidate;
}

export function toPolicyView(row: PolicyRow): PolicyView {
  return {
    walletId: row.walletId,
    maxPerTx: usd(row.maxPerTxMicros),
    dailyLimit: usd(row.dailyLimitMicros),
    whitelist: row.whitelist,
    alertAbove: usd(row.alertAboveMicros),
    approvalAbove: usd(row.approvalAboveMicros),
    requireSpendAuthorization: row.requireSpendAuthorization,
    status: row.status,
    updatedAt: row.updatedAt.toISOString(),
  };
}
