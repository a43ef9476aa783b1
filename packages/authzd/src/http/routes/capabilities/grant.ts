import { objectWithKeys, optionalString, stringField } from "../../fields.ts";
import type { Route } from "../../types.ts";

/** `POST /capabilities/grant` `{ identity, capability, expires_at? }` (operator). */
export const grantCapability: Route = {
  method: "POST",
  path: "/capabilities/grant",
  auth: "operator",
  handle: async ({ service, json }) => {
    const body = objectWithKeys(json(), ["identity", "capability"], ["expires_at"]);
    const grant = await service.grant(
      stringField(body, "identity"),
      stringField(body, "capability"),
      optionalString(body, "expires_at"),
    );
    return { status: 200, body: { kind: "capability_granted", ...grant } };
  },
};
