import { z } from "zod";
import { send } from "../../../spends/send.ts";
import { findTransactionForAccount, toTransactionView } from "../../../transactions/transactions.ts";
import { errorResponses, idParam, tokenAmount, transactionView } from "../../schemas.ts";
import { type App, principalOf, type Services } from "../../types.ts";

/** POST /v1/wallets/:id/send: send USDC or the chain's native coin. */
export function registerSend(app: App, services: Services): void {
  app.route({
    method: "POST",
    url: "/v1/wallets/:id/send",
    config: {
      auth: "account",
      role: "agent",
      walletParam: "id",
      idempotency: {
        resume: async (request, transactionId) => ({
          status: 201,
          body: toTransactionView(
            await findTransactionForAccount(services.store.db, principalOf(request).accountId, transactionId),
          ),
        }),
      },
    },
    schema: {
      tags: ["spends"],
      summary:
        "Send tokens; checked against the policy, recorded pending before broadcast. Honours Idempotency-Key.",
      params: z.object({ id: idParam("wal") }),
      body: z.strictObject({
        to: z.string().min(1).max(128),
        amount: tokenAmount,
        token: z.string().min(1).max(16).default("USDC"),
        chain: z.string().min(1).max(64),
        spendAuthorization: z.strictObject({ decisionId: z.string().min(1).max(200) }).optional(),
      }),
      response: { 201: transactionView, ...errorResponses(403, 404, 409, 413, 422, 502) },
    },
    handler: async (request, reply) => {
      const { spendAuthorization, ...rest } = request.body;
      const row = await send(
        {
          db: services.store.db,
          keyring: services.keyring,
          chainClient: (name: string) => services.chains.client(name),
          authzd: services.authzd,
        },
        principalOf(request).accountId,
        request.params.id,
        { ...rest, spendDecisionId: spendAuthorization?.decisionId },
        request.idempotencyClaim ?? undefined,
      );
      return reply.status(201).send(toTransactionView(row));
    },
  });
}
