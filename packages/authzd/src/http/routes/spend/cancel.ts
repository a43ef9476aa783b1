import type { Route } from "../../types.ts";

/**
 * `POST /spend/cancel` `{ decision_id }`: the payer's approved spend was never made, so its
 * reservation (held or lapsed) stops counting. Needs `wallet.spend.settle` (the capability of the
 * client that reports what became of a decision). 200 (the same body on repeats); 404 unknown, denied
 * or another payer's decision; 409 `already_settled`, `decision_consumed` (the wallet service took it for
 * a spend), `decision_released` (the wallet service gave it back; its credits are already free).
 */
export const cancel: Route = {
  method: "POST",
  path: "/spend/cancel",
  auth: "identity",
  handle: async ({ caller, service, json }) => {
    if (caller?.kind !== "identity") throw new Error("identity route reached without an identity");
    service.admitSpend(caller.identity, "wallet.spend.settle");
    return { status: 200, body: await service.cancel(caller.identity, json()) };
  },
};
