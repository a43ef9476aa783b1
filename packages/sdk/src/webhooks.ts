/**
 * Verifying the service's webhooks (Standard Webhooks: `webhook-id`, `webhook-timestamp`, `webhook-signature`
 * `v1,<base64 HMAC-SHA256>` over `id.timestamp.body`, secret `whsec_…`) with the specification's own library.
 */
import { Webhook, WebhookVerificationError } from "standardwebhooks";
import { SvcValidationError, SvcWebhookVerificationError } from "./errors.ts";
import type { WebhookEvent } from "./types.ts";

/** Header values as the common servers hand them over: a `Headers`, or Node's / a framework's plain object. */
export type WebhookHeaders = Headers | Record<string, string | string[] | undefined>;

const REQUIRED_HEADERS = ["webhook-id", "webhook-timestamp", "webhook-signature"] as const;

/** What the library's messages mean, as a reason a caller can branch on. */
function reasonOf(message: string): string {
  if (/missing required headers/i.test(message)) return "missing_headers";
  if (/too old/i.test(message)) return "timestamp_too_old";
  if (/too new/i.test(message)) return "timestamp_too_new";
  if (/invalid signature headers/i.test(message)) return "invalid_timestamp";
  return "invalid_signature";
}

function headerRecord(headers: WebhookHeaders): Record<string, string> {
  const read =
    headers instanceof Headers
      ? (name: string) => headers.get(name) ?? undefined
      : (name: string) => {
          const entry = Object.entries(headers).find(([key]) => key.toLowerCase() === name)?.[1];
          return Array.isArray(entry) ? entry.join(" ") : entry;
        };
  const record: Record<string, string> = {};
  for (const name of REQUIRED_HEADERS) {
    const value = read(name);
    if (value !== undefined) record[name] = value;
  }
  return record;
}

/**
 * Checks a webhook the service delivered and returns its event. Pass the body exactly as received (the raw
 * text or bytes, not re-serialized JSON), the request's headers, and the endpoint's secret (`whsec_…`, from
 * `svc.webhooks.create`). Throws {@link SvcWebhookVerificationError} when a header is missing, the
 * signature does not match the body, or the timestamp is more than 5 minutes from this machine's clock (a
 * replay); {@link SvcValidationError} (`invalid_secret`) when the secret is not one.
 * The event's id is the `webhook-id` header: deliveries are at least once, so use it to drop repeats.
 * @example
 * import { verifyWebhook } from "@svc/sdk";
 *
 * const event = verifyWebhook(rawBody, request.headers, process.env.SVC_WEBHOOK_SECRET!);
 * if (event.type === "approval.requested") notifyOwner(event.data.id, event.data.amount);
 */
export function verifyWebhook(
  payload: string | Uint8Array,
  headers: WebhookHeaders,
  secret: string,
): WebhookEvent {
  if (typeof payload !== "string" && !(payload instanceof Uint8Array)) {
    throw new SvcValidationError({
      code: "ValidationError",
      status: 0,
      message: "verifyWebhook: the payload must be the raw body, a string or bytes",
      reason: "invalid_input",
    });
  }
  if (headers === null || typeof headers !== "object") {
    throw new SvcValidationError({
      code: "ValidationError",
      status: 0,
      message: "verifyWebhook: headers must be a Headers or an object of header values",
      reason: "invalid_input",
    });
  }
  let webhook: Webhook;
  try {
    if (typeof secret !== "string" || !/^whsec_[A-Za-z0-9+/]+={0,2}$/.test(secret)) throw new Error("format");
    webhook = new Webhook(secret);
  } catch {
    // The secret itself never goes into the message.
    throw new SvcValidationError({
      code: "ValidationError",
      status: 0,
      message: "verifyWebhook: the secret must be the endpoint's whsec_… signing secret",
      reason: "invalid_secret",
    });
  }
  const body = typeof payload === "string" ? payload : new TextDecoder().decode(payload);
  let parsed: unknown;
  try {
    parsed = webhook.verify(body, headerRecord(headers));
  } catch (error) {
    if (error instanceof WebhookVerificationError) {
      throw new SvcWebhookVerificationError(
        `Webhook not verified: ${error.message}`,
        reasonOf(error.message),
        error,
      );
    }
    // Signed correctly but not JSON.
    throw new SvcWebhookVerificationError("Webhook body is not JSON", "invalid_payload", error);
  }
  const event = parsed as Partial<WebhookEvent> | null | undefined;
  if (
    event === null ||
    typeof event !== "object" ||
    typeof event.type !== "string" ||
    typeof event.timestamp !== "string" ||
    event.data === null ||
    typeof event.data !== "object"
  ) {
    throw new SvcWebhookVerificationError(
      "Webhook body is not an event ({ type, timestamp, data })",
      "invalid_payload",
    );
  }
  return event as WebhookEvent;
}
