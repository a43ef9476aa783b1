import type { Route } from "../../types.ts";

/**
 * `POST /spend/authorize` (spec 2.9 body). 200 with the verdict for approve and deny;
 * 503 when not enabled, 403 without `wallet.spend.authorize`, 400/413/415 for bad bodies.
 */
export const authorize: Route = {
  method: "POST",
  path: "/spend/authorize",
  auth: "identity",
  handle: async ({ caller, service, json }) => {
    if (caller?.kind !== "identity") throw new Error("identity route reached without an identity");
    service.admitSpend(caller.identity, "wallet.spend.authorize");
    return { status: 200, body: await service.authorize(caller.identity, json()) };
  },
};
