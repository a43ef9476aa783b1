import { z } from "zod";
import { getWalletBalances } from "../../../../wallets/balances.ts";
import { onWallet } from "../../../guards.ts";
import { errorResponses, jsonResponse, timestamp, walletPathParams } from "../../../schemas.ts";
import { type App, principalOf, type Services } from "../../../types.ts";

const balanceView = z
  .object({
    walletId: z.string(),
    balances: z.array(
      z.object({
        chain: z.string(),
        token: z.string(),
        amount: z.string().meta({ description: "decimal amount in token units", example: "125.5" }),
        usdValue: z.string().nullable().meta({
          description:
            "decimal dollars, rounded down to the micro-dollar; null when the token has no known price",
          example: "125.50",
        }),
      }),
    ),
    totalUsdValue: z.string().meta({
      description: "sum of the usdValues that are known; balances whose usdValue is null are not counted",
      example: "3125.50",
    }),
    updatedAt: timestamp,
  })
  .meta({
    id: "WalletBalance",
    example: {
      walletId: "wal_4bG7hQ2nR8sT1vX3yZ5aC9",
      balances: [
        { chain: "base", token: "USDC", amount: "125.5", usdValue: "125.50" },
        { chain: "base", token: "ETH", amount: "1", usdValue: "3000.00" },
      ],
      totalUsdValue: "3125.50",
      updatedAt: "2026-01-01T00:00:00.000Z",
    },
  });

/** GET /v1/wallets/:id/balance: native and token balances read from each of the wallet's chains. */
export function registerGetBalance(app: App, services: Services): void {
  app.route({
    method: "GET",
    url: "/v1/wallets/:id/balance",
    config: onWallet("read"),
    schema: {
      operationId: "getWalletBalance",
      tags: ["wallets"],
      summary: "Balances of the wallet on each of its chains, with USD values",
      params: walletPathParams,
      response: {
        200: jsonResponse("Balances read from the chains", balanceView),
        ...errorResponses(404, 502),
      },
    },
    handler: async (request) =>
      getWalletBalances(
        { db: services.store.db, chains: services.chains },
        principalOf(request).accountId,
        request.params.id,
      ),
  });
}
