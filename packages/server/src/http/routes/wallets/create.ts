import { z } from "zod";
import { createWallet, toWalletView } from "../../../wallets/wallets.ts";
import { displayName, errorResponses, jsonResponse, policyInput, walletView } from "../../schemas.ts";
import { type App, principalOf, type Services } from "../../types.ts";

const MAX_METADATA_BYTES = 8 * 1024;

const metadataSchema = z
  .record(z.string().min(1).max(64), z.unknown())
  .refine((value) => Object.keys(value).length <= 50, "at most 50 keys")
  .refine(
    (value) => JSON.stringify(value).length <= MAX_METADATA_BYTES,
    `at most ${MAX_METADATA_BYTES} bytes as JSON`,
  );

/** POST /v1/wallets: create a wallet with service-generated keys. */
export function registerCreateWallet(app: App, services: Services): void {
  app.route({
    method: "POST",
    url: "/v1/wallets",
    config: { auth: "account", role: "admin" },
    schema: {
      operationId: "createWallet",
      tags: ["wallets"],
      summary: "Create a wallet; the service generates and keeps its keys",
      body: z
        .strictObject({
          name: displayName,
          chains: z.array(z.string().min(1).max(64)).min(1).max(16),
          metadata: metadataSchema.optional(),
          policy: policyInput(services.chains).optional(),
        })
        .meta({
          example: {
            name: "trading agent",
            chains: ["base", "solana"],
            metadata: { team: "research" },
            policy: { maxPerTx: "10", dailyLimit: "50" },
          },
        }),
      response: {
        201: jsonResponse("The new wallet", walletView),
        ...errorResponses(403, [
          409,
          "ValidationError `too_many_wallets`: the account holds `SVC_MAX_WALLETS_PER_ACCOUNT` wallets (default 1000), archived ones included",
        ]),
      },
    },
    handler: async (request, reply) => {
      const wallet = await createWallet(
        {
          db: services.store.db,
          keyring: services.keyring,
          chains: services.chains,
          maxWallets: services.config.accountLimits.wallets,
        },
        principalOf(request).accountId,
        request.body,
      );
      return reply.status(201).send(toWalletView(wallet));
    },
  });
}
