import { eq } from "drizzle-orm";
import { z } from "zod";
import { walletPolicies } from "../internal/db/schema.ts";
import type { Db } from "../internal/db/store.ts";
import { InexactNumber } from "../internal/exact-json.ts";
import { formatUnits, parseUnitsStrict, USD_DECIMALS } from "../internal/money.ts";

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
  whitelist: z.array(z.string().min(1).max(255)).max(1000).optional(),
});
export type PolicyInput = z.infer<typeof policyInputSchema>;

/** The policy resource as api.md shows it. */
export interface PolicyView {
  walletId: string;
  maxPerTx: string | null;
  dailyLimit: string | null;
  whitelist: string[];
  alertAbove: string | null;
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
    whitelist: input?.whitelist ?? [],
    status: "active" as const,
  };
}

export type PolicyRow = typeof walletPolicies.$inferSelect;

/** Reads a wallet's policy (the caller has already checked the wallet belongs to the account). */
export async function getPolicy(db: Db, walletId: string): Promise<PolicyView> {
  return toPolicyView(await getPolicyRow(db, walletId));
}

/** The stored policy row, for the spend checks. */
export async function getPolicyRow(db: Db, walletId: string): Promise<PolicyRow> {
  const [row] = await db.select().from(walletPolicies).where(eq(walletPolicies.walletId, walletId));
  if (!row) throw new Error(`wallet ${walletId} has no policy row`);
  return row;
}

/** Changes the given fields of a wallet's policy; fields left out keep their value, `null` removes a bound. */
export async function updatePolicy(db: Db, walletId: string, input: PolicyInput): Promise<PolicyView> {
  const set: Partial<typeof walletPolicies.$inferInsert> = { updatedAt: new Date() };
  if (input.maxPerTx !== undefined) set.maxPerTxMicros = input.maxPerTx;
  if (input.dailyLimit !== undefined) set.dailyLimitMicros = input.dailyLimit;
  if (input.alertAbove !== undefined) set.alertAboveMicros = input.alertAbove;
  if (input.whitelist !== undefined) set.whitelist = input.whitelist;
  const [row] = await db
    .update(walletPolicies)
    .set(set)
    .where(eq(walletPolicies.walletId, walletId))
    .returning();
  if (!row) throw new Error(`wallet ${walletId} has no policy row`);
  return toPolicyView(row);
}

/** Pauses or resumes all spending from a wallet. */
export async function setPolicyStatus(
  db: Db,
  walletId: string,
  status: "active" | "paused",
): Promise<PolicyView> {
  const [row] = await db
    .update(walletPolicies)
    .set({ status, updatedAt: new Date() })
    .where(eq(walletPolicies.walletId, walletId))
    .returning();
  if (!row) throw new Error(`wallet ${walletId} has no policy row`);
  return toPolicyView(row);
}

export function toPolicyView(row: PolicyRow): PolicyView {
  return {
    walletId: row.walletId,
    maxPerTx: usd(row.maxPerTxMicros),
    dailyLimit: usd(row.dailyLimitMicros),
    whitelist: row.whitelist,
    alertAbove: usd(row.alertAboveMicros),
    status: row.status,
    updatedAt: row.updatedAt.toISOString(),
  };
}
