import { z } from "zod";
import { findWalletForAccount, toWalletView } from "../../../wallets/wallets.ts";
import { errorResponses, idParam, walletView } from "../../schemas.ts";
import { type App, principalOf, type Services } from "../../types.ts";

/** GET /v1/wallets/:id: one wallet of the account. */
export function registerGetWallet(app: App, services: Services): void {
  app.route({
    method: "GET",
    url: "/v1/wallets/:id",
    config: { auth: "account", role: "read", walletParam: "id" },
    schema: {
      tags: ["wallets"],
      summary: "Get a wallet",
      params: z.object({ id: idParam("wal") }),
      response: { 200: walletView, ...errorResponses(404) },
    },
    handler: async (request) =>
      toWalletView(
        await findWalletForAccount(services.store.db, principalOf(request).accountId, request.params.id),
      ),
  });
}
