import { z } from "zod";
import { discoverServices } from "../../../x402/discovery.ts";
import { errorResponses, jsonResponse, MAX_PAGE_SIZE } from "../../schemas.ts";
import type { App, Services } from "../../types.ts";

const DEFAULT_LIMIT = 20;

const serviceExample = {
  resource: "https://api.example.com/weather",
  type: "http",
  x402Version: 2,
  description: "Weather by city",
  tags: ["weather"],
  accepts: [
    {
      scheme: "exact",
      network: "eip155:8453",
      amount: "10000",
      asset: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
      payTo: "0x000000000000000000000000000000000000dEaD",
    },
  ],
};

const discoveredService = z
  .object({
    resource: z.string().meta({ description: "the URL to fetch (with POST /v1/x402/fetch)" }),
    type: z.string(),
    x402Version: z.number().int(),
    description: z.string().optional(),
    mimeType: z.string().optional(),
    serviceName: z.string().optional(),
    tags: z.array(z.string()).optional(),
    lastUpdated: z.string().optional(),
    accepts: z
      .array(z.record(z.string(), z.unknown()))
      .meta({ description: "the payment requirements the facilitator lists, verbatim" }),
  })
  .meta({
    id: "PaidService",
    description: "A payable resource, as the facilitator's discovery endpoint lists it",
    example: serviceExample,
  });

/** GET /v1/x402/services: payable resources from the configured facilitator's discovery endpoint. */
export function registerListX402Services(app: App, services: Services): void {
  app.route({
    method: "GET",
    url: "/v1/x402/services",
    config: { auth: "account", role: "read" },
    schema: {
      operationId: "listPaidServices",
      tags: ["x402"],
      summary: "List payable x402 services known to the configured facilitator (its Bazaar discovery)",
      querystring: z.strictObject({
        category: z.string().min(1).max(64).optional().meta({ description: "a tag the service carries" }),
        query: z
          .string()
          .min(1)
          .max(200)
          .optional()
          .meta({ description: "text in its URL, name, description or tags" }),
        limit: z
          .string()
          .regex(/^\d{1,10}$/, "limit must be a positive integer")
          .transform(Number)
          .pipe(z.number().int().min(1))
          .optional(),
      }),
      response: {
        200: jsonResponse(
          "The payable services, in the facilitator's order",
          z.object({ data: z.array(discoveredService) }).meta({ example: { data: [serviceExample] } }),
        ),
        ...errorResponses([
          502,
          "InternalError `discovery_unavailable`: no facilitator is configured, or it has no discovery endpoint or does not answer",
        ]),
      },
    },
    handler: async (request) => {
      const { category, query, limit } = request.query;
      const data = await discoverServices(services.config.x402FacilitatorUrl, {
        category,
        query,
        limit: Math.min(limit ?? DEFAULT_LIMIT, MAX_PAGE_SIZE),
      });
      return { data };
    },
  });
}
