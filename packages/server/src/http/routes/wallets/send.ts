import { z } from "zod";
import { send } from "../../../spends/send.ts";
import { type TransactionRow, toTransactionView } from "../../../transactions/transactions.ts";
import { onWallet } from "../../guards.ts";
import { errorResponses, tokenAmount, transactionResponse, walletPathParams } from "../../schemas.ts";
import { spendAsker, spendDeps } from "../../spend-deps.ts";
import { type App, principalOf, type Services } from "../../types.ts";

/** POST /v1/wallets/:id/send: send USDC or the chain's native coin. */
export function registerSend(app: App, services: Services): void {
  app.route({
    method: "POST",
    url: "/v1/wallets/:id/send",
    config: {
      ...onWallet("agent"),
      idempotency: {
        resume: (_request, row) => ({ status: sendStatus(row), body: toTransactionView(row) }),
      },
    },
    schema: {
      operationId: "send",
      tags: ["spends"],
      summary:
        "Send tokens; checked against the policy, recorded pending before broadcast. Honours Idempotency-Key.",
      params: walletPathParams,
      body: z
        .strictObject({
          to: z.string().min(1).max(128),
          amount: tokenAmount,
          token: z.string().min(1).max(16).default("USDC"),
          chain: z.string().min(1).max(64),
          spendAuthorization: z.strictObject({ decisionId: z.string().min(1).max(200) }).optional(),
        })
        .meta({
          example: {
            to: "0x000000000000000000000000000000000000dEaD",
            amount: "2.5",
            token: "USDC",
            chain: "base",
          },
        }),
      response: {
        201: transactionResponse("Accepted and broadcast: the pending transaction, with its txHash"),
        202: transactionResponse(
          "Above the policy's approvalAbove: recorded `pending_approval`, reserved against the daily limit, not signed; an admin approves or rejects it (/v1/approvals)",
        ),
        ...errorResponses(
          [
            403,
            "PolicyViolation: the wallet's policy refuses the spend (`max_per_tx`, `daily_limit`, `recipient_not_allowed`, `policy_paused`, `spend_authorization_*`), or Forbidden `insufficient_role`",
          ],
          404,
          409,
          422,
          502,
        ),
      },
    },
    handler: async (request, reply) => {
      const { spendAuthorization, ...rest } = request.body;
      const row = await send(
        spendDeps(services),
        principalOf(request).accountId,
        request.params.id,
        { ...rest, spendDecisionId: spendAuthorization?.decisionId },
        spendAsker(request),
      );
      return reply.status(sendStatus(row)).send(toTransactionView(row));
    },
  });
}

/** 201 for a spend sent; 202 for one waiting for an admin's approval. */
function sendStatus(row: TransactionRow): 201 | 202 {
  return row.status === "pending_approval" ? 202 : 201;
}
