import { findWalletForAccount, toWalletView } from "../../../wallets/wallets.ts";
import { onWallet } from "../../guards.ts";
import { errorResponses, jsonResponse, walletPathParams, walletView } from "../../schemas.ts";
import { type App, principalOf, type Services } from "../../types.ts";

/** GET /v1/wallets/:id: one wallet of the account. */
export function registerGetWallet(app: App, services: Services): void {
  app.route({
    method: "GET",
    url: "/v1/wallets/:id",
    config: onWallet("read"),
    schema: {
      operationId: "getWallet",
      tags: ["wallets"],
      summary: "Get a wallet",
      params: walletPathParams,
      response: { 200: jsonResponse("The wallet", walletView), ...errorResponses(404) },
    },
    handler: async (request) =>
      toWalletView(
        await findWalletForAccount(services.store.db, principalOf(request).accountId, request.params.id),
      ),
  });
}
