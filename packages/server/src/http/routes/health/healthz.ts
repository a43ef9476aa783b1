import { z } from "zod";
import { errors } from "../../../internal/errors.ts";
import { errorResponse } from "../../schemas.ts";
import type { App, Services } from "../../types.ts";

/** GET /healthz: 200 when the store answers. */
export function registerHealthz(app: App, services: Services): void {
  app.route({
    method: "GET",
    url: "/healthz",
    config: { auth: "public" },
    schema: {
      tags: ["operations"],
      summary: "Liveness and store health",
      response: {
        200: z.object({ status: z.literal("ok"), store: z.enum(["pglite", "postgres"]) }),
        503: errorResponse,
      },
    },
    handler: async () => {
      try {
        await services.store.ping();
      } catch (error) {
        throw errors.storeUnavailable(error);
      }
      return { status: "ok" as const, store: services.store.kind };
    },
  });
}
