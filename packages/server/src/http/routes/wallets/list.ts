import { z } from "zod";
import { listWallets, toWalletView } from "../../../wallets/wallets.ts";
import { errorResponses, walletView } from "../../schemas.ts";
import { type App, principalOf, type Services } from "../../types.ts";

/** GET /v1/wallets: the account's wallets, newest first. */
export function registerListWallets(app: App, services: Services): void {
  app.route({
    method: "GET",
    url: "/v1/wallets",
    config: { auth: "account" },
    schema: {
      tags: ["wallets"],
      summary: "List the account's wallets, newest first (archived ones included)",
      response: { 200: z.array(walletView), ...errorResponses() },
    },
    handler: async (request) =>
      (await listWallets(services.store.db, principalOf(request).accountId)).map(toWalletView),
  });
}
