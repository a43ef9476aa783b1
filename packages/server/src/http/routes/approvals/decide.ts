import { z } from "zod";
import { approveSpend, rejectSpend } from "../../../approvals/approvals.ts";
import { toTransactionView } from "../../../transactions/transactions.ts";
import { errorResponses, idParam, transactionResponse } from "../../schemas.ts";
import { spendAsker, spendDeps } from "../../spend-deps.ts";
import { type App, principalOf, type Services } from "../../types.ts";

/**
 * POST /v1/approvals/:id/approve and /reject (admin): the owner's decision on a held spend. Both honour
 * Idempotency-Key; a second decision, or one racing another, answers 409 `already_decided`.
 */
export function registerDecideApproval(app: App, services: Services): void {
  for (const decision of ["approve", "reject"] as const) {
    app.route({
      method: "POST",
      url: `/v1/approvals/:id/${decision}`,
      config: {
        auth: "account",
        role: "admin",
        idempotency: {
          resume: (_request, row) => ({ status: 200, body: toTransactionView(row) }),
        },
      },
      schema: {
        operationId: decision === "approve" ? "approveSpend" : "rejectSpend",
        tags: ["approvals"],
        summary:
          decision === "approve"
            ? "Approve a held spend: the policy is checked again, then it is signed and broadcast like any send"
            : "Reject a held spend: it ends rejected (failureReason approval_rejected) and its reservation is released",
        params: z.object({ id: idParam("tx") }),
        response: {
          200: transactionResponse(
            decision === "approve"
              ? "Approved and broadcast: the transaction, now pending with its txHash"
              : "Rejected: the transaction, status rejected",
          ),
          ...errorResponses(
            [
              403,
              "PolicyViolation: the policy refuses the spend now, or its spend authorization's credits no longer cover it (`spend_authorization_mismatch`: its recipient closed the token account it held); it stays waiting. Or Forbidden `insufficient_role`",
            ],
            404,
            [409, "ValidationError `already_decided`: approved, rejected or expired already"],
            ...(decision === "approve" ? ([422, 502] as const) : []),
          ),
        },
      },
      handler: async (request) => {
        const { accountId } = principalOf(request);
        const row =
          decision === "approve"
            ? await approveSpend(spendDeps(services), accountId, request.params.id, spendAsker(request))
            : await rejectSpend(
                spendDeps(services),
                accountId,
                request.params.id,
                request.idempotencyClaim ?? undefined,
              );
        return toTransactionView(row);
      },
    });
  }
}
