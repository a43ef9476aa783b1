import { z } from "zod";
import {
  EVENT_TYPES,
  type EventType,
  formatCursor,
  listEvents,
  parseCursor,
  START_CURSOR,
  toEventView,
} from "../../../events/events.ts";
import { errors } from "../../../internal/errors.ts";
import { findWalletForAccount } from "../../../wallets/wallets.ts";
import { hasRole, mayActOnWallet } from "../../access.ts";
import { errorResponses, idParam, integerQuery, jsonResponse, MAX_PAGE_SIZE } from "../../schemas.ts";
import { type App, type Principal, principalOf, type Services } from "../../types.ts";

const eventView = z
  .object({
    id: z.string().meta({ description: "the event's id; a webhook delivery's `webhook-id`" }),
    type: z.enum(EVENT_TYPES),
    createdAt: z.string(),
    data: z
      .record(z.string(), z.unknown())
      .meta({ description: "the resource as it stood: a transaction, a policy, a wallet, a key record" }),
  })
  .meta({
    id: "Event",
    example: {
      id: "evt_2mQ8rT4vX6zB1dF3hJ5kL7",
      type: "transaction.confirmed",
      createdAt: "2026-01-01T00:00:00.000Z",
      data: { id: "tx_7kLmN3pQ9rS2tU5vW8xY1z", status: "confirmed" },
    },
  });

/**
 * The events a credential may see: an admin credential for every wallet sees every event of the account;
 * any other sees those about its wallets, all of them for a key bound to none (account-wide events, such as
 * API keys', are an admin's).
 */
function visibleWallets(principal: Principal): readonly string[] | "any" | undefined {
  if (hasRole(principal, "admin") && principal.walletIds === null) return undefined;
  return principal.walletIds ?? "any";
}

/** GET /v1/events: the account's events, oldest first, after a cursor. */
export function registerListEvents(app: App, services: Services): void {
  app.route({
    method: "GET",
    url: "/v1/events",
    config: { auth: "account", role: "read" },
    schema: {
      operationId: "listEvents",
      tags: ["events"],
      summary:
        "Events oldest first after a cursor; poll from nextCursor. Admin credentials see every event, other keys those of their wallets.",
      description:
        "Events are kept `SVC_EVENT_RETENTION_DAYS` (default 30), then deleted with their webhook delivery records: a cursor from before then goes on from the oldest event left.",
      querystring: z.strictObject({
        after: z
          .string()
          .max(40)
          .optional()
          .meta({ description: "a nextCursor from an earlier page; absent = from the first event" }),
        type: z
          .string()
          .max(500)
          .optional()
          .meta({ description: "one event type, or several separated by commas" }),
        walletId: idParam("wal").optional(),
        limit: integerQuery("limit", 1, 1_000_000_000).optional(),
      }),
      response: {
        200: jsonResponse(
          "A page of events and the cursor to read on from (present even when the page is empty)",
          z
            .object({ data: z.array(eventView), nextCursor: z.string() })
            .meta({ id: "EventPage", example: { data: [], nextCursor: "7421.93" } }),
        ),
        ...errorResponses(404),
      },
    },
    handler: async (request) => {
      const principal = principalOf(request);
      const query = request.query;
      const after = query.after === undefined ? START_CURSOR : parseCursor(query.after);
      if (!after) throw errors.invalidQuery("after must be a nextCursor this API returned");
      let types: EventType[] | undefined;
      if (query.type !== undefined) {
        const asked = query.type.split(",").map((type) => type.trim());
        const unknown = asked.find((type) => !(EVENT_TYPES as readonly string[]).includes(type));
        if (unknown !== undefined)
          throw errors.invalidQuery(
            `Unknown event type ${JSON.stringify(unknown)}; the types are ${EVENT_TYPES.join(", ")}`,
          );
        types = asked as EventType[];
      }
      let walletIds = visibleWallets(principal);
      if (query.walletId !== undefined) {
        if (!mayActOnWallet(principal, query.walletId)) throw errors.walletNotFound(query.walletId);
        await findWalletForAccount(services.store.db, principal.accountId, query.walletId);
        walletIds = [query.walletId];
      }
      const page = await listEvents(
        services.store.db,
        { accountId: principal.accountId, walletIds, types },
        after,
        Math.min(query.limit ?? 50, MAX_PAGE_SIZE),
      );
      return { data: page.rows.map(toEventView), nextCursor: formatCursor(page.nextCursor) };
    },
  });
}
