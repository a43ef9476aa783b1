import { z } from "zod";
import { errors } from "../../../internal/errors.ts";
import {
  listTransactions,
  TRANSACTION_TYPES,
  toTransactionView,
} from "../../../transactions/transactions.ts";
import { findWalletForAccount } from "../../../wallets/wallets.ts";
import { errorResponses, idParam, transactionView } from "../../schemas.ts";
import { type App, principalOf, type Services } from "../../types.ts";

/** The largest page served; a larger `limit` is served as this (spec 8). */
export const MAX_PAGE_SIZE = 100;

const integerQuery = (name: string, min: number, max: number) =>
  z
    .string()
    .regex(/^\d{1,10}$/, `${name} must be a non-negative integer`)
    .transform(Number)
    .pipe(z.number().int().min(min).max(max));

/** GET /v1/wallets/:id/transactions: a page of the wallet's history, newest first. */
export function registerListTransactions(app: App, services: Services): void {
  app.route({
    method: "GET",
    url: "/v1/wallets/:id/transactions",
    config: { auth: "account", role: "read", walletParam: "id" },
    schema: {
      tags: ["transactions"],
      summary: "List a wallet's transactions, newest first",
      params: z.object({ id: idParam("wal") }),
      querystring: z.strictObject({
        limit: integerQuery("limit", 1, 1_000_000_000).optional(),
        offset: integerQuery("offset", 0, 1_000_000_000).optional(),
        chain: z.string().min(1).max(64).optional(),
        type: z.enum(TRANSACTION_TYPES).optional(),
      }),
      response: {
        200: z.object({
          data: z.array(transactionView),
          total: z.number().int(),
          limit: z.number().int(),
          offset: z.number().int(),
        }),
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
