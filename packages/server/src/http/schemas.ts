import { z } from "zod";

/** Shapes shared by several routes' response schemas (and so by the OpenAPI document). */

export const errorResponse = z
  .object({
    error: z.object({
      code: z.string(),
      message: z.string(),
      requestId: z.string(),
      reason: z.string().optional(),
      details: z.record(z.string(), z.unknown()).optional(),
    }),
  })
  .meta({ id: "Error" });

/** The error responses a route can give, for its schema. */
export function errorResponses(...statuses: number[]) {
  return Object.fromEntries([400, 401, 429, ...statuses].map((status) => [status, errorResponse]));
}

export const timestamp = z.string().meta({ format: "date-time", example: "2026-01-01T00:00:00.000Z" });

/** Resource ids in paths: the prefix and base62, bounded so junk never reaches the store. */
export const idParam = (prefix: string) =>
  z.string().regex(new RegExp(`^${prefix}_[0-9A-Za-z]{1,64}$`), `must be a ${prefix}_ identifier`);

export const walletView = z
  .object({
    id: z.string(),
    name: z.string(),
    chains: z.array(z.string()),
    evm: z.object({ address: z.string() }).optional(),
    solana: z.object({ address: z.string() }).optional(),
    metadata: z.record(z.string(), z.unknown()),
    status: z.enum(["active", "archived"]),
    createdAt: timestamp,
  })
  .meta({ id: "Wallet" });

export const transactionView = z
  .object({
    id: z.string(),
    walletId: z.string(),
    type: z.enum(["send", "receive", "x402"]),
    amount: z.string().meta({ description: "decimal amount in token units", example: "10.5" }),
    token: z.string(),
    chain: z.string(),
    to: z.string(),
    from: z.string(),
    txHash: z.string().optional(),
    timestamp,
    status: z.enum(["pending", "confirmed", "failed"]),
    confirmedAt: timestamp.optional(),
    failureReason: z.string().optional(),
    spendDecisionId: z.string().optional(),
  })
  .meta({ id: "Transaction" });

export const apiKeyView = z
  .object({
    id: z.string(),
    name: z.string(),
    role: z.enum(["admin", "agent", "read"]),
    walletIds: z
      .array(z.string())
      .nullable()
      .meta({ description: "the wallets the key may see and act on; null = every wallet of the account" }),
    expiresAt: timestamp.nullable(),
    createdAt: timestamp,
    lastUsed: timestamp.nullable(),
  })
  .meta({ id: "ApiKey" });

/** A short human name: trimmed, non-empty, at most 100 characters. */
export const displayName = z.string().trim().min(1).max(100);

const usdOrNull = z
  .string()
  .nullable()
  .meta({ description: "USD as a decimal string; null = no bound", example: "50" });

export const policyView = z
  .object({
    walletId: z.string(),
    maxPerTx: usdOrNull,
    dailyLimit: usdOrNull,
    whitelist: z.array(z.string()),
    alertAbove: usdOrNull,
    requireSpendAuthorization: z.boolean(),
    status: z.enum(["active", "paused"]),
    updatedAt: timestamp,
  })
  .meta({ id: "Policy" });

/**
 * A token amount on the wire: a decimal string, or a JSON number that reads back exactly as written (no
 * exponent, no integer beyond 2^53). Anything else is refused rather than rounded.
 */
export const tokenAmount = z
  .union([z.string().max(80), z.number()])
  .transform((value, ctx) => {
    if (typeof value === "string") return value;
    const text = String(value);
    if (
      !Number.isFinite(value) ||
      /e/i.test(text) ||
      (Number.isInteger(value) && !Number.isSafeInteger(value))
    ) {
      ctx.addIssue({
        code: "custom",
        message: "send this amount as a decimal string; as a JSON number it is not exact",
      });
      return z.NEVER;
    }
    return text;
  })
  .meta({ type: "string", description: 'decimal amount in token units, e.g. "2.5"', example: "2.5" });
