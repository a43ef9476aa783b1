import { z } from "zod";
import {
  type IdempotencyClaim,
  requestFingerprint,
  runIdempotent,
  type StoredResponse,
} from "../../../idempotency/idempotency.ts";
import { send } from "../../../spends/send.ts";
import { findTransactionForAccount, toTransactionView } from "../../../transactions/transactions.ts";
import { errorResponses, idParam, tokenAmount, transactionView } from "../../schemas.ts";
import { type App, principalOf, type Services } from "../../types.ts";

const idempotencyKeyHeader = z.string().min(1).max(255);

/** POST /v1/wallets/:id/send: send USDC or the chain's native coin. */
export function registerSend(app: App, services: Services): void {
  app.route({
    method: "POST",
    url: "/v1/wallets/:id/send",
    config: { auth: "account", role: "agent", walletParam: "id" },
    schema: {
      tags: ["spends"],
      summary:
        "Send tokens; checked against the policy, recorded pending before broadcast. Honours Idempotency-Key.",
      params: z.object({ id: idParam("wal") }),
      headers: z.object({ "idempotency-key": idempotencyKeyHeader.optional() }).passthrough(),
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
      const { accountId } = principalOf(request);
      const key = request.headers["idempotency-key"];
      const deps = {
        db: services.store.db,
        keyring: services.keyring,
        chainClient: (name: string) => services.chains.client(name),
        authzd: services.authzd,
      };
      const { spendAuthorization, ...rest } = request.body;
      const run = async (claim?: IdempotencyClaim): Promise<StoredResponse> => {
        const row = await send(
          deps,
          accountId,
          request.params.id,
          { ...rest, spendDecisionId: spendAuthorization?.decisionId },
          claim,
        );
        return { status: 201, body: toTransactionView(row) };
      };
      if (key === undefined) {
        const response = await run();
        return reply.status(response.status as 201).send(response.body as never);
      }
      const response = await runIdempotent(
        services.store.db,
        {
          accountId,
          key,
          fingerprint: requestFingerprint("POST", request.routeOptions.url ?? "", {
            params: request.params,
            body: request.body,
          }),
        },
        run,
        async (transactionId) => ({
          status: 201,
          body: toTransactionView(
            await findTransactionForAccount(services.store.db, accountId, transactionId),
          ),
        }),
      );
      reply.header("idempotent-replayed", String(response.replayed));
      const body = response.body as { error?: Record<string, unknown> };
      // A replayed refusal keeps its facts; its requestId is this request's, like its X-Request-Id.
      if (body?.error)
        return reply
          .status(response.status as 201)
          .send({ error: { ...body.error, requestId: request.id } } as never);
      return reply.status(response.status as 201).send(body as never);
    },
  });
}
