import { z } from "zod";
import { errors } from "../../../internal/errors.ts";
import { errorResponses, jsonResponse } from "../../schemas.ts";
import type { App, Services } from "../../types.ts";

/** GET /healthz: 200 when the store answers. */
export function registerHealthz(app: App, services: Services): void {
  app.route({
    method: "GET",
    url: "/healthz",
    config: { auth: "public" },
    schema: {
      operationId: "getHealth",
      tags: ["operations"],
      summary: "Liveness and store health",
      response: {
        200: jsonResponse(
          "The service and its store answer",
          z
            .object({ status: z.literal("ok"), store: z.enum(["pglite", "postgres"]) })
            .meta({ id: "Health", example: { status: "ok", store: "postgres" } }),
        ),
        ...errorResponses(503),
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
