import { z } from "zod";
import { errors } from "../../../../internal/errors.ts";
import {
  listTransactions,
  TRANSACTION_TYPES,
  toTransactionView,
} from "../../../../transactions/transactions.ts";
import { findWalletForAccount } from "../../../../wallets/wallets.ts";
import { onWallet } from "../../../guards.ts";
import {
  errorResponses,
  jsonResponse,
  MAX_PAGE_SIZE,
  pageQuery,
  transactionExample,
  transactionView,
  walletPathParams,
} from "../../../schemas.ts";
import { type App, principalOf, type Services } from "../../../types.ts";

/** GET /v1/wallets/:id/transactions: a page of the wallet's history, newest first. */
export function registerListTransactions(app: App, services: Services): void {
  app.route({
    method: "GET",
    url: "/v1/wallets/:id/transactions",
    config: onWallet("read"),
    schema: {
      operationId: "listTransactions",
      tags: ["transactions"],
      summary: "List a wallet's transactions, newest first",
      params: walletPathParams,
      querystring: z.strictObject({
        ...pageQuery,
        chain: z.string().min(1).max(64).optional(),
        type: z.enum(TRANSACTION_TYPES).optional(),
      }),
      response: {
        200: jsonResponse(
          "A page of the wallet's transactions",
          z
            .object({
              data: z.array(transactionView),
              total: z
                .number()
                .int()
                .meta({ description: "transactions matching the filters, on every page" }),
              limit: z.number().int(),
              offset: z.number().int(),
            })
            .meta({
              id: "TransactionPage",
              example: { data: [transactionExample], total: 1, limit: 20, offset: 0 },
            }),
        ),
        ...errorResponses(404),
      },
    },
    handler: async (request) => {
      const { chain, type } = request.query;
      if (chain !== undefined && !services.chains.get(chain)) {
        throw errors.invalidQuery(
          `Unknown chain ${JSON.stringify(chain)}; this deployment serves ${services.chains.names().join(", ")}`,
        );
      }
      const wallet = await findWalletForAccount(
        services.store.db,
        principalOf(request).accountId,
        request.params.id,
      );
      const limit = Math.min(request.query.limit ?? 20, MAX_PAGE_SIZE);
      const offset = request.query.offset ?? 0;
      const page = await listTransactions(services.store.db, wallet.id, { chain, type }, { limit, offset });
      return { data: page.rows.map(toTransactionView), total: page.total, limit, offset };
    },
  });
}
