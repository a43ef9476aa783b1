/**
 * Payable services, from the x402 facilitator's discovery endpoint (the Bazaar extension's
 * `GET /discovery/resources`): `{ x402Version, items: [{ resource, type, x402Version, accepts, lastUpdated,
 * description?, mimeType?, serviceName?, tags?, … }], pagination }`. The facilitator is the operator's
 * (`SVC_X402_FACILITATOR_URL`), not a caller's, so it is fetched without the outbound guard.
 */
import { errors } from "../internal/errors.ts";
import { isJsonObject } from "./encoding.ts";

/** One payable resource as the service lists it. */
export interface DiscoveredService {
  resource: string;
  type: string;
  x402Version: number;
  description?: string;
  mimeType?: string;
  serviceName?: string;
  tags?: string[];
  lastUpdated?: string;
  /** The payment requirements the facilitator lists for it, verbatim. */
  accepts: Record<string, unknown>[];
}

/** What a caller asks of the list. */
export interface DiscoveryQuery {
  /** Only resources tagged with this (case-insensitive). */
  category?: string | undefined;
  /** Only resources whose URL, name, description or tags contain this text (case-insensitive). */
  query?: string | undefined;
  limit: number;
}

/** Asked of the facilitator when the list is filtered here: the most a page of the Bazaar holds. */
const FILTERED_PAGE = 1000;
const DISCOVERY_TIMEOUT_MS = 10_000;

/**
 * Lists the payable resources the facilitator at `facilitatorUrl` knows, filtered by `category` and
 * `query`, at most `limit`. Throws 502 `discovery_unavailable` when none is configured, or it does not
 * answer, has no discovery endpoint, or answers something else than a discovery list.
 * @example await discoverServices("https://x402.org/facilitator", { query: "weather", limit: 20 })
 */
export async function discoverServices(
  facilitatorUrl: string | undefined,
  query: DiscoveryQuery,
): Promise<DiscoveredService[]> {
  if (facilitatorUrl === undefined) {
    throw errors.discoveryUnavailable(
      "No x402 facilitator is configured (SVC_X402_FACILITATOR_URL), so no payable services can be listed",
    );
  }
  const filtered = query.category !== undefined || query.query !== undefined;
  const url = new URL(`${facilitatorUrl}/discovery/resources`);
  url.searchParams.set("type", "http");
  url.searchParams.set("limit", String(filtered ? FILTERED_PAGE : query.limit));
  let response: Response;
  let document: unknown;
  try {
    response = await fetch(url, {
      headers: { accept: "application/json" },
      signal: AbortSignal.timeout(DISCOVERY_TIMEOUT_MS),
    });
    document = response.ok ? await response.json() : undefined;
  } catch (error) {
    throw errors.discoveryUnavailable(`The x402 facilitator's discovery endpoint did not answer`, error);
  }
  if (!response.ok) {
    throw errors.discoveryUnavailable(
      `The x402 facilitator has no discovery endpoint (GET /discovery/resources answered ${response.status})`,
    );
  }
  const items = isJsonObject(document) && Array.isArray(document.items) ? document.items : undefined;
  if (!items) {
    throw errors.discoveryUnavailable("The x402 facilitator's discovery endpoint answered no list of items");
  }
  const services = items.flatMap((item) => {
    const service = readService(item);
    return service ? [service] : [];
  });
  return services.filter((service) => matches(service, query)).slice(0, query.limit);
}

function readService(item: unknown): DiscoveredService | undefined {
  if (!isJsonObject(item) || typeof item.resource !== "string") return undefined;
  const text = (field: string) => (typeof item[field] === "string" ? { [field]: item[field] as string } : {});
  return {
    resource: item.resource,
    type: typeof item.type === "string" ? item.type : "http",
    x402Version: typeof item.x402Version === "number" ? item.x402Version : 1,
    ...text("description"),
    ...text("mimeType"),
    ...text("serviceName"),
    ...text("lastUpdated"),
    ...(Array.isArray(item.tags)
      ? { tags: item.tags.filter((tag): tag is string => typeof tag === "string") }
      : {}),
    accepts: Array.isArray(item.accepts) ? item.accepts.filter(isJsonObject) : [],
  };
}

function matches(service: DiscoveredService, query: DiscoveryQuery): boolean {
  const tags = (service.tags ?? []).map((tag) => tag.toLowerCase());
  if (query.category !== undefined && !tags.includes(query.category.toLowerCase())) return false;
  if (query.query !== undefined) {
    const needle = query.query.toLowerCase();
    const haystack = [service.resource, service.serviceName, service.description, ...tags]
      .filter((text): text is string => text !== undefined)
      .map((text) => text.toLowerCase());
    if (!haystack.some((text) => text.includes(needle))) return false;
  }
  return true;
}
