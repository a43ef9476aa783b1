/**
 * The tools' output schemas: the service's resources as the SDK returns them (amounts stay decimal strings).
 * Objects are loose, so a field the service adds later passes through instead of failing validation.
 */
import { z } from "zod";

export const walletOutput = z.looseObject({
  id: z.string(),
  name: z.string(),
  chains: z.array(z.string()),
  evm: z.object({ address: z.string() }).optional(),
  solana: z.object({ address: z.string() }).optional(),
  metadata: z.record(z.string(), z.unknown()),
  status: z.enum(["active", "archived"]),
  createdAt: z.string(),
});

export const transactionOutput = z.looseObject({
  id: z.string(),
  walletId: z.string(),
  type: z.string(),
  amount: z.string().describe("Token units, a decimal string"),
  token: z.string(),
  chain: z.string(),
  to: z.string(),
  from: z.string(),
  txHash: z.string().optional(),
  timestamp: z.string(),
  status: z.string().describe("pending, confirmed, failed, pending_approval or rejected"),
  confirmedAt: z.string().optional(),
  failureReason: z.string().optional(),
  resource: z.string().optional(),
  fee: z
    .object({ amount: z.string().describe("Native coin units, a decimal string"), token: z.string() })
    .optional()
    .describe(
      "A spend that landed on chain (confirmed, or failed there): what it cost the wallet in the chain's native coin (ETH, SOL) beyond its amount, the network fee and on Solana the rent of a token account opened for the recipient. Absent while pending, and for receives and x402 payments (their facilitator pays)",
    ),
});

export const balanceOutput = z.looseObject({
  walletId: z.string(),
  balances: z.array(
    z.looseObject({
      chain: z.string(),
      token: z.string(),
      amount: z.string(),
      usdValue: z.string().nullable(),
    }),
  ),
  totalUsdValue: z.string(),
  updatedAt: z.string(),
});

export const policyOutput = z.looseObject({
  walletId: z.string(),
  maxPerTx: z.string().nullable().describe("USD per transaction; null = no bound"),
  dailyLimit: z.string().nullable().describe("USD per rolling day; null = no bound"),
  whitelist: z.array(z.string()),
  alertAbove: z.string().nullable(),
  approvalAbove: z.string().nullable().optional(),
  requireSpendAuthorization: z.boolean().optional(),
  status: z.enum(["active", "paused"]),
  updatedAt: z.string(),
});

export const serviceOutput = z.looseObject({
  resource: z.string(),
  type: z.string(),
  x402Version: z.number(),
  description: z.string().optional(),
  accepts: z.array(z.record(z.string(), z.unknown())),
});

/** Input fields with the API's names. */
export const walletId = z.string().min(1).describe("The wallet's id, wal_…");
export const decimalAmount = z
  .string()
  .regex(/^(0|[1-9]\d{0,30})(\.\d{1,18})?$/, 'a decimal string, e.g. "1.5"')
  .describe('Token units as a decimal string, e.g. "1.5"');
export const usdAmount = z
  .string()
  .regex(/^(0|[1-9]\d{0,30})(\.\d{1,18})?$/, 'a decimal string of US dollars, e.g. "10"');
