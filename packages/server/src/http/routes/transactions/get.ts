import { z } from "zod";
import { errors } from "../../../internal/errors.ts";
import { findTransactionForAccount, toTransactionView } from "../../../transactions/transactions.ts";
import { mayActOnWallet } from "../../access.ts";
import { errorResponses, idParam, transactionResponse } from "../../schemas.ts";
import { type App, principalOf, type Services } from "../../types.ts";

/** GET /v1/transactions/:id: one transaction of any of the account's wallets. */
export function registerGetTransaction(app: App, services: Services): void {
  app.route({
    method: "GET",
    url: "/v1/transactions/:id",
    config: { auth: "account", role: "read" },
    schema: {
      operationId: "getTransaction",
      tags: ["transactions"],
      summary: "Get a transaction",
      params: z.object({ id: idParam("tx") }),
      response: { 200: transactionResponse("The transaction"), ...errorResponses(404) },
    },
    handler: async (request) => {
      const principal = principalOf(request);
      const row = await findTransactionForAccount(services.store.db, principal.accountId, request.params.id);
      if (!mayActOnWallet(principal, row.walletId)) throw errors.transactionNotFound(request.params.id);
      return toTransactionView(row);
    },
  });
}
