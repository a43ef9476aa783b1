import type { Route } from "../../types.ts";

/**
 * `POST /spend/release` `{ decision_id }` (`wallet.spend.verify`, the identity that consumed it): the
 * spend was refused before anything was signed, so the decision's credits stop counting and it can no
 * longer be used. 200 (the same body on repeats); 404 unknown; 409 `not_consumed_by_caller`,
 * `already_settled`.
 */
export const release: Route = {
  method: "POST",
  path: "/spend/release",
  auth: "identity",
  handle: async ({ caller, service, json }) => {
    if (caller?.kind !== "identity") throw new Error("identity route reached without an identity");
    service.admitSpend(caller.identity, "wallet.spend.verify");
    return { status: 200, body: await service.release(caller.identity, json()) };
  },
};
