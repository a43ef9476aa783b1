import { z } from "zod";
import { formatUsd } from "../../../../internal/money.ts";
import { dailyLimitStanding } from "../../../../policy/spend-window.ts";
import { findWalletForAccount } from "../../../../wallets/wallets.ts";
import { onWallet } from "../../../guards.ts";
import { errorResponses, jsonResponse, timestamp, walletPathParams } from "../../../schemas.ts";
import { type App, principalOf, type Services } from "../../../types.ts";

const usd = (description: string) => z.string().meta({ description, example: "12.50" });

const spendingView = z
  .object({
    walletId: z.string(),
    dailyLimit: usd("the policy's daily limit in USD").nullable(),
    used: usd("USD the rolling 24 h holds: the figure the daily limit is checked against"),
    remaining: usd("USD left under the daily limit").nullable(),
    windowStart: timestamp,
    resetsAt: timestamp.meta({ description: "when the oldest spend in the window leaves it" }),
    hours: z.array(z.object({ start: timestamp, usd: usd("USD spent in this hour") })).meta({
      description:
        "the 24 hours of the window, oldest first; a spend counts in the hour it was made (one made while the window was read, in the last)",
    }),
  })
  .meta({
    id: "WalletSpending",
    example: {
      walletId: "wal_4bG7hQ2nR8sT1vX3yZ5aC9",
      dailyLimit: "50.00",
      used: "12.50",
      remaining: "37.50",
      windowStart: "2026-01-01T00:00:00.000Z",
      resetsAt: "2026-01-02T09:12:00.000Z",
      hours: [{ start: "2026-01-01T00:00:00.000Z", usd: "0.00" }],
    },
  });

/**
 * GET /v1/wallets/:id/spending: the rolling 24 h the daily limit counts (sends and x402 payments waiting for
 * approval, pending or confirmed), in total and by hour.
 */
export function registerGetSpending(app: App, services: Services): void {
  app.route({
    method: "GET",
    url: "/v1/wallets/:id/spending",
    config: onWallet("read"),
    schema: {
      operationId: "getWalletSpending",
      tags: ["wallets"],
      summary: "Spending in the rolling 24 h against the daily limit, by hour",
      params: walletPathParams,
      response: {
        200: jsonResponse("The window's total, the limit, and the spends by hour", spendingView),
        ...errorResponses(404),
      },
    },
    handler: async (request) => {
      const db = services.store.db;
      const wallet = await findWalletForAccount(db, principalOf(request).accountId, request.params.id);
      const { dailyLimitMicros: limit, spending } = await dailyLimitStanding(db, wallet.id, services.now());
      return {
        walletId: wallet.id,
        dailyLimit: limit === null ? null : formatUsd(limit),
        used: formatUsd(spending.used),
        remaining: limit === null ? null : formatUsd(limit > spending.used ? limit - spending.used : 0n),
        windowStart: spending.windowStart.toISOString(),
        resetsAt: spending.resetsAt.toISOString(),
        hours: spending.hours.map((hour) => ({
          start: hour.start.toISOString(),
          usd: formatUsd(hour.usdMicros),
        })),
      };
    },
  });
}
