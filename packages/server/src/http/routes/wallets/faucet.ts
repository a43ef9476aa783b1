import { z } from "zod";
import { toTransactionView } from "../../../transactions/transactions.ts";
import { onWallet } from "../../guards.ts";
import { errorResponses, tokenAmount, transactionResponse, walletPathParams } from "../../schemas.ts";
import { type App, principalOf, type Services } from "../../types.ts";

/** POST /v1/wallets/:id/faucet: test coins on local and test networks. */
export function registerFaucet(app: App, services: Services): void {
  app.route({
    method: "POST",
    url: "/v1/wallets/:id/faucet",
    config: onWallet("agent"),
    schema: {
      operationId: "payFromFaucet",
      tags: ["wallets"],
      summary: "Pay the wallet test coins (local and test networks only)",
      description:
        "Pays from the faucet account on chain and returns once the payment is confirmed, with the " +
        "resulting `receive` transaction (the same row the history shows; recorded once). Default amount: " +
        "100 USDC or 1 native coin. Capped per wallet, chain and token over a rolling 24 h (by default " +
        "1,000 USDC and 10 ETH / SOL): over the cap is 400 ValidationError `faucet_cap_exceeded` with " +
        "`details` { cap, used, requested, remaining, resetsAt }. A chain that is not a local or test " +
        "network (or has no faucet account) is 404 NotFound `faucet_unavailable`.",
      params: walletPathParams,
      body: z
        .strictObject({
          chain: z.string().min(1).max(64),
          token: z.string().min(1).max(16).meta({ example: "USDC" }),
          amount: tokenAmount.optional(),
        })
        .meta({ example: { chain: "base", token: "USDC", amount: "25" } }),
      response: {
        201: transactionResponse("Paid and confirmed: the wallet's `receive` transaction"),
        ...errorResponses(
          403,
          [404, "NotFound: no such wallet, or `faucet_unavailable` on this chain"],
          409,
          502,
        ),
      },
    },
    handler: async (request, reply) => {
      const row = await services.faucet.pay(principalOf(request).accountId, request.params.id, request.body);
      return reply.status(201).send(toTransactionView(row));
    },
  });
}
