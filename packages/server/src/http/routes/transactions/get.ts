import { z } from "zod";
import { findTransactionForAccount, toTransactionView } from "../../../transactions/transactions.ts";
import { errorResponses, idParam, transactionView } from "../../schemas.ts";
import { type App, principalOf, type Services } from "../../types.ts";

/** GET /v1/transactions/:id: one transaction of any of the account's wallets. */
export function registerGetTransaction(app: App, services: Services): void {
  app.route({
    method: "GET",
    url: "/v1/transactions/:id",
    config: { auth: "account" },
    schema: {
      tags: ["transactions"],
      summary: "Get a transaction",
      params: z.object({ id: idParam("tx") }),
      response: { 200: transactionView, ...errorResponses(404) },
    },
    handler: async (request) =>
      toTransactionView(
        await findTransactionForAccount(services.store.db, principalOf(request).accountId, request.params.id),
      ),
  });
}
