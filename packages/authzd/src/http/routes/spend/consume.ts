import type { Route } from "../../types.ts";

/**
 * `POST /spend/consume` `{ decision_id }` (`wallet.spend.verify`): the wallet service takes an approved
 * decision for the one spend it admits, before signing; answers the decision's facts, now `consumed`.
 * After it the payer's cancel is refused (409 `decision_consumed`). 404 unknown or malformed id; 409 with
 * a code naming why (`decision_denied`, `already_settled`, `decision_cancelled`, `decision_released`,
 * `decision_consumed`, `reservation_expired`) and the decision's view otherwise.
 */
export const consume: Route = {
  method: "POST",
  path: "/spend/consume",
  auth: "identity",
  handle: async ({ caller, service, json }) => {
    if (caller?.kind !== "identity") throw new Error("identity route reached without an identity");
    service.admitSpend(caller.identity, "wallet.spend.verify");
    return { status: 200, body: await service.consume(caller.identity, json()) };
  },
};
