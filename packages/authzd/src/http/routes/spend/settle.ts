import type { Route } from "../../types.ts";

/**
 * `POST /spend/settle` `{ decision_id, provider, network, asset, amount, credits, tx_sig? }`.
 * 200 with the receipt (the same one on repeats); 404 unknown decision, 409 changed facts, expired
 * reservation, cancelled or released decision; 403 without `wallet.spend.settle`.
 */
export const settle: Route = {
  method: "POST",
  path: "/spend/settle",
  auth: "identity",
  handle: async ({ caller, service, json }) => {
    if (caller?.kind !== "identity") throw new Error("identity route reached without an identity");
    service.admitSpend(caller.identity, "wallet.spend.settle");
    return { status: 200, body: await service.settle(caller.identity, json()) };
  },
};
