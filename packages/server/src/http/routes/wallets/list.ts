import { z } from "zod";
import { listWallets, toWalletView } from "../../../wallets/wallets.ts";
import { mayActOnWallet } from "../../access.ts";
import { jsonResponse, MAX_PAGE_SIZE, pageQuery, walletView } from "../../schemas.ts";
import { type App, principalOf, type Services } from "../../types.ts";

/** GET /v1/wallets: the account's wallets, newest first. */
export function registerListWallets(app: App, services: Services): void {
  app.route({
    method: "GET",
    url: "/v1/wallets",
    config: { auth: "account", role: "read" },
    schema: {
      operationId: "listWallets",
      tags: ["wallets"],
      summary: "List the account's wallets, newest first (archived ones included)",
      description: `Every wallet unless \`limit\` is given; then at most ${MAX_PAGE_SIZE} from \`offset\` (default 0). An unknown parameter or a bad value is 400 \`invalid_query\`.`,
      querystring: z.strictObject(pageQuery),
      response: { 200: jsonResponse("The wallets, newest first", z.array(walletView)) },
    },
    handler: async (request) => {
      const principal = principalOf(request);
      const rows = await listWallets(services.store.db, principal.accountId);
      const { limit, offset = 0 } = request.query;
      const end = limit === undefined ? undefined : offset + Math.min(limit, MAX_PAGE_SIZE);
      return rows
        .filter((row) => mayActOnWallet(principal, row.id))
        .slice(offset, end)
        .map(toWalletView);
    },
  });
}
