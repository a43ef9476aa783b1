import { z } from "zod";
import { listWallets, toWalletView } from "../../../wallets/wallets.ts";
import { mayActOnWallet } from "../../access.ts";
import { errorResponses, walletView } from "../../schemas.ts";
import { type App, principalOf, type Services } from "../../types.ts";

/** GET /v1/wallets: the account's wallets, newest first. */
export function registerListWallets(app: App, services: Services): void {
  app.route({
    method: "GET",
    url: "/v1/wallets",
    config: { auth: "account", role: "read" },
    schema: {
      tags: ["wallets"],
      summary: "List the account's wallets, newest first (archived ones included)",
      response: { 200: z.array(walletView), ...errorResponses() },
    },
    handler: async (request) => {
      const principal = principalOf(request);
      const rows = await listWallets(services.store.db, principal.accountId);
      return rows.filter((row) => mayActOnWallet(principal, row.id)).map(toWalletView);
    },
  });
}
