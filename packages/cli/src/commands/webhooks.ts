import { EVENT_TYPES, type EventType, type WebhookEndpoint } from "@svc/sdk";
import type { Command } from "commander";
import type { Context } from "../context.ts";
import { usage } from "../failure.ts";
import { fields, table, when } from "../output.ts";
import { list, wholeNumber } from "../parse.ts";

/** A week: the longest the service lets a replaced secret go on signing. */
const MAX_PREVIOUS_SECRET_SECONDS = 7 * 86_400;

/**
 * `svc webhooks create|list|deliveries|redeliver|rotate-secret|delete`: the endpoints the service posts the
 * account's events to, signed (admin).
 * @example
 * addWebhookCommands(program, contextOf);
 */
export function addWebhookCommands(program: Command, contextOf: (command: Command) => Context): void {
  const webhooks = program
    .command("webhooks")
    .description("endpoints the service posts the account's events to, signed (admin)");
  webhooks
    .command("create <url>")
    .description("register an endpoint; its signing secret is shown this once")
    .option(
      "--events <types>",
      `comma-separated event types (default: every type): ${EVENT_TYPES.join(", ")}`,
    )
    .option("--description <text>", "what the endpoint is for")
    .action(async (url: string, options: { events?: string; description?: string }, command: Command) => {
      const ctx = contextOf(command);
      const created = await (await ctx.client()).webhooks.create({
        url,
        ...(options.events === undefined ? {} : { events: eventTypes(options.events) }),
        ...(options.description === undefined ? {} : { description: options.description }),
      });
      ctx.print(created, () =>
        [
          endpointFields(created, [["secret", created.secret]]),
          "The secret is shown this once: give it to the receiver now (verifyWebhook in @svc/sdk checks it).",
        ].join("\n"),
      );
    });
  webhooks
    .command("list")
    .description("the account's endpoints (never their secrets)")
    .action(async (_options: unknown, command: Command) => {
      const ctx = contextOf(command);
      const endpoints = await (await ctx.client()).webhooks.list();
      ctx.print(endpoints, () =>
        endpoints.length === 0
          ? "No webhook endpoints"
          : table(
              [{ heading: "ID" }, { heading: "URL" }, { heading: "EVENTS" }, { heading: "CREATED" }],
              endpoints.map((endpoint) => [
                endpoint.id,
                endpoint.url,
                eventsOf(endpoint),
                when(endpoint.createdAt),
              ]),
            ),
      );
    });
  webhooks
    .command("deliveries <endpointId>")
    .description("the endpoint's delivery attempts, newest first")
    .option("--event <eventId>", "only the attempts at this event")
    .option("--limit <n>", "at most this many", wholeNumber("--limit", 1, 100))
    .action(async (endpointId: string, options: { event?: string; limit?: number }, command: Command) => {
      const ctx = contextOf(command);
      const attempts = await (await ctx.client()).webhooks.deliveries(endpointId, {
        ...(options.event === undefined ? {} : { eventId: options.event }),
        ...(options.limit === undefined ? {} : { limit: options.limit }),
      });
      ctx.print(attempts, () =>
        attempts.length === 0
          ? "Nothing delivered yet"
          : table(
              [
                { heading: "EVENT" },
                { heading: "ATTEMPT", align: "right" },
                { heading: "STATUS" },
                { heading: "HTTP", align: "right" },
                { heading: "AT" },
                { heading: "ERROR" },
              ],
              attempts.map((attempt) => [
                attempt.eventId,
                `${attempt.attempt}${attempt.redelivery ? " (redelivery)" : ""}`,
                attempt.status,
                attempt.responseStatus === null ? "-" : String(attempt.responseStatus),
                when(attempt.at),
                attempt.error ?? "",
              ]),
            ),
      );
    });
  webhooks
    .command("redeliver <endpointId> <eventId>")
    .description("send one event to the endpoint once more (one attempt, outside its order)")
    .action(async (endpointId: string, eventId: string, _options: unknown, command: Command) => {
      const ctx = contextOf(command);
      await (await ctx.client()).webhooks.redeliver(endpointId, eventId);
      ctx.print({ endpointId, eventId, queued: true }, () => `Queued ${eventId} for ${endpointId} once more`);
    });
  webhooks
    .command("rotate-secret <endpointId>")
    .description(
      "give the endpoint a new signing secret, shown this once; the one it replaces signs beside it for a while",
    )
    .option(
      "--previous-valid-for <seconds>",
      "how long the replaced secret goes on signing too: 0 for a leaked one, at most a week",
      wholeNumber("--previous-valid-for", 0, MAX_PREVIOUS_SECRET_SECONDS),
      86_400,
    )
    .action(async (endpointId: string, options: { previousValidFor: number }, command: Command) => {
      const ctx = contextOf(command);
      const rotated = await (await ctx.client()).webhooks.rotateSecret(endpointId, {
        previousSecretValidForSeconds: options.previousValidFor,
      });
      ctx.print(rotated, () =>
        [
          endpointFields(rotated, [
            ["secret", rotated.secret],
            [
              "old secret signs until",
              rotated.previousSecretExpiresAt ? when(rotated.previousSecretExpiresAt) : "no more",
            ],
          ]),
          "The secret is shown this once: give it to the receiver now.",
        ].join("\n"),
      );
    });
  webhooks
    .command("delete <endpointId>")
    .description("remove an endpoint; nothing more is delivered to it")
    .action(async (endpointId: string, _options: unknown, command: Command) => {
      const ctx = contextOf(command);
      await (await ctx.client()).webhooks.delete(endpointId);
      ctx.print({ id: endpointId, deleted: true }, () => `Deleted ${endpointId}`);
    });
}

/** Event types given as `a,b`, each one the service sends. */
function eventTypes(value: string): EventType[] {
  const types = list(value);
  const unknown = types.filter((type) => !(EVENT_TYPES as readonly string[]).includes(type));
  if (types.length === 0 || unknown.length > 0) {
    throw usage(
      `--events takes event types from: ${EVENT_TYPES.join(", ")}${unknown.length > 0 ? ` (not ${unknown.join(", ")})` : ""}`,
    );
  }
  return types as EventType[];
}

function eventsOf(endpoint: WebhookEndpoint): string {
  return endpoint.events === null ? "every event" : endpoint.events.join(", ");
}

function endpointFields(endpoint: WebhookEndpoint, more: [string, string][]): string {
  return fields([
    ["id", endpoint.id],
    ["url", endpoint.url],
    ["events", eventsOf(endpoint)],
    ...(endpoint.description === null ? [] : ([["description", endpoint.description]] as [string, string][])),
    ...more,
  ]);
}
