import type { z } from "zod";
import type { PolicyChanger, PolicyView } from "../../../../policy/policy.ts";
import { findWalletForAccount } from "../../../../wallets/wallets.ts";
import { policyChanger } from "../../../access.ts";
import { onWallet } from "../../../guards.ts";
import { errorResponses, jsonResponse, policyView, walletPathParams } from "../../../schemas.ts";
import { type App, principalOf, type Role, type Services } from "../../../types.ts";

/** What differs between reading, changing, pausing and resuming a wallet's policy. */
export interface PolicyRoute<Body extends z.ZodType> {
  method: "GET" | "PATCH" | "POST";
  /** The path after `/v1/wallets/:id/policy`. */
  path: "" | "/pause" | "/resume";
  role: Role;
  operationId: string;
  summary: string;
  description?: string;
  body?: Body;
  /** The refusals beyond those of every route and 404 (another account's wallet), for the document. */
  refusals: Parameters<typeof errorResponses>;
  /** Reads or changes the policy of `walletId`, already checked to be the caller's. */
  act(walletId: string, changer: PolicyChanger, body: z.output<Body>): Promise<PolicyView>;
}

/**
 * Registers one of the routes under `/v1/wallets/:id/policy`: the wallet in the path, looked up in the
 * caller's account (404 otherwise, as for any wallet); the Policy in the answer.
 * @example registerPolicyRoute(app, services, { method: "GET", path: "", role: "read", …, act: (id) => getPolicy(db, id) })
 */
export function registerPolicyRoute<Body extends z.ZodType = z.ZodUndefined>(
  app: App,
  services: Services,
  route: PolicyRoute<Body>,
): void {
  app.route({
    method: route.method,
    url: `/v1/wallets/:id/policy${route.path}`,
    config: onWallet(route.role),
    schema: {
      operationId: route.operationId,
      tags: ["policy"],
      summary: route.summary,
      ...(route.description ? { description: route.description } : {}),
      params: walletPathParams,
      ...(route.body ? { body: route.body } : {}),
      response: {
        200: jsonResponse("The wallet's policy, as it now stands", policyView),
        ...errorResponses(404, ...route.refusals),
      },
    },
    handler: async (request) => {
      const principal = principalOf(request);
      const wallet = await findWalletForAccount(services.store.db, principal.accountId, request.params.id);
      return route.act(wallet.id, policyChanger(principal), request.body as z.output<Body>);
    },
  });
}
