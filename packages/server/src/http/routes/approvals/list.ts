import { z } from "zod";
import { APPROVAL_STATUSES, listApprovals } from "../../../approvals/approvals.ts";
import { toTransactionView } from "../../../transactions/transactions.ts";
import {
  errorResponses,
  integerQuery,
  jsonResponse,
  MAX_PAGE_SIZE,
  transactionExample,
  transactionView,
} from "../../schemas.ts";
import { type App, principalOf, type Services } from "../../types.ts";

/** GET /v1/approvals: spends held for an admin's approval, by state. */
export function registerListApprovals(app: App, services: Services): void {
  app.route({
    method: "GET",
    url: "/v1/approvals",
    config: { auth: "account", role: "read" },
    schema: {
      operationId: "listApprovals",
      tags: ["approvals"],
      summary:
        "Spends above their policy's approvalAbove, by approval state (default pending: oldest first); a key bound to wallets sees theirs",
      querystring: z.strictObject({
        status: z.enum(APPROVAL_STATUSES).default("pending"),
        limit: integerQuery("limit", 1, 1_000_000_000).optional(),
      }),
      response: {
        200: jsonResponse(
          "The held spends: each a Transaction with the approval's deadline as expiresAt",
          z
            .object({
              data: z.array(
                transactionView.extend({
                  expiresAt: z.string().meta({ description: "when the approval expires undecided" }),
                }),
              ),
            })
            .meta({
              id: "ApprovalList",
              example: {
                data: [
                  {
                    ...transactionExample,
                    amount: "250",
                    status: "pending_approval",
                    approval: { status: "pending", expiresAt: "2026-01-01T01:00:00.000Z" },
                    expiresAt: "2026-01-01T01:00:00.000Z",
                  },
                ],
              },
            }),
        ),
        ...errorResponses(),
      },
    },
    handler: async (request) => {
      const principal = principalOf(request);
      const rows = await listApprovals(
        services.store.db,
        principal.accountId,
        { status: request.query.status, walletIds: principal.walletIds ?? undefined },
        Math.min(request.query.limit ?? 50, MAX_PAGE_SIZE),
      );
      return {
        data: rows.map((row) => ({
          ...toTransactionView(row),
          expiresAt: (row.approvalExpiresAt ?? row.createdAt).toISOString(),
        })),
      };
    },
  });
}
