import { objectWithKeys, stringField } from "../../fields.ts";
import type { Route } from "../../types.ts";

/** `POST /capabilities/revoke` `{ identity, capability }` (operator). */
export const revokeCapability: Route = {
  method: "POST",
  path: "/capabilities/revoke",
  auth: "operator",
  handle: async ({ service, json }) => {
    const body = objectWithKeys(json(), ["identity", "capability"]);
    const identity = stringField(body, "identity");
    const capability = stringField(body, "capability");
    await service.revoke(identity, capability);
    return { status: 200, body: { kind: "capability_revoked", identity, capability } };
  },
};
