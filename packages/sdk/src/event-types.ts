import type { EventType } from "./types.ts";

/**
 * Every event type the service writes, as a list (for a filter or a webhook subscription form). The
 * compiler refuses this file when a type of {@link EventType} is missing here.
 * @example
 * for (const type of EVENT_TYPES) console.log(type);
 */
export const EVENT_TYPES = [
  "transaction.created",
  "transaction.confirmed",
  "transaction.failed",
  "transaction.received",
  "spend.alert",
  "approval.requested",
  "approval.approved",
  "approval.rejected",
  "approval.expired",
  "policy.updated",
  "wallet.archived",
  "wallet.restored",
  "api_key.created",
  "api_key.revoked",
] as const satisfies readonly EventType[];

const everyTypeListed: Exclude<EventType, (typeof EVENT_TYPES)[number]> extends never ? true : never = true;
void everyTypeListed;
