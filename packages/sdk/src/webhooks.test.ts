import { randomBytes } from "node:crypto";
import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import { SvcValidationError, SvcWebhookVerificationError } from "./errors.ts";
import { verifyWebhook } from "./webhooks.ts";

const secret = `whsec_${randomBytes(24).toString("base64")}`;
const signer = new Webhook(secret);
const event = {
  type: "approval.requested",
  timestamp: "2026-11-23T01:00:00.000Z",
  data: { id: "tx_7kLmN3pQ9rS2tU5vW8xY1z", amount: "250", status: "pending_approval" },
};
const body = JSON.stringify(event);

/** Headers as the service sends them, signed by the Standard Webhooks library itself. */
function signed(payload: string, at = new Date(), id = "evt_2mQ8rT4vX6zB1dF3hJ5kL7") {
  return {
    "webhook-id": id,
    "webhook-timestamp": String(Math.floor(at.getTime() / 1000)),
    "webhook-signature": signer.sign(id, at, payload),
  };
}

function refusal(run: () => unknown): SvcWebhookVerificationError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(SvcWebhookVerificationError);
    return error as SvcWebhookVerificationError;
  }
  throw new Error("verified, though it should not have");
}

describe("verifyWebhook", () => {
  it("returns the event of a body signed with the endpoint's secret, whatever form the headers come in", () => {
    const headers = signed(body);
    expect(verifyWebhook(body, headers, secret)).toEqual(event);
    expect(verifyWebhook(body, new Headers(headers), secret)).toEqual(event);
    expect(verifyWebhook(new TextEncoder().encode(body), headers, secret)).toEqual(event);
    const capitalized = {
      "Webhook-Id": headers["webhook-id"],
      "Webhook-Timestamp": headers["webhook-timestamp"],
      "Webhook-Signature": headers["webhook-signature"],
      "Content-Type": "application/json",
    };
    expect(verifyWebhook(body, capitalized, secret)).toEqual(event);
    // During a secret rotation a sender signs with both; one match is enough.
    const rotated = { ...headers, "webhook-signature": `v1,AAAA ${headers["webhook-signature"]}` };
    expect(verifyWebhook(body, rotated, secret).type).toBe("approval.requested");
  });

  it("refuses a tampered body, another event id, another secret, and missing headers", () => {
    const headers = signed(body);
    const tampered = body.replace('"250"', '"2500"');
    expect(refusal(() => verifyWebhook(tampered, headers, secret)).reason).toBe("invalid_signature");
    expect(refusal(() => verifyWebhook(body, { ...headers, "webhook-id": "evt_other" }, secret)).reason).toBe(
      "invalid_signature",
    );
    const otherSecret = `whsec_${randomBytes(24).toString("base64")}`;
    expect(refusal(() => verifyWebhook(body, headers, otherSecret)).reason).toBe("invalid_signature");
    const { "webhook-signature": _, ...unsigned } = headers;
    const missing = refusal(() => verifyWebhook(body, unsigned, secret));
    expect(missing).toMatchObject({ reason: "missing_headers", code: "WebhookVerificationError" });
  });

  it("refuses an old timestamp (a replay), a moved timestamp, and one from the future", () => {
    const tenMinutesAgo = new Date(Date.now() - 10 * 60_000);
    const old = signed(body, tenMinutesAgo);
    expect(refusal(() => verifyWebhook(body, old, secret)).reason).toBe("timestamp_too_old");
    // The old signature with a fresh timestamp: the timestamp is signed too.
    const moved = { ...old, "webhook-timestamp": String(Math.floor(Date.now() / 1000)) };
    expect(refusal(() => verifyWebhook(body, moved, secret)).reason).toBe("invalid_signature");
    const future = signed(body, new Date(Date.now() + 10 * 60_000));
    expect(refusal(() => verifyWebhook(body, future, secret)).reason).toBe("timestamp_too_new");
  });

  it("refuses a signed body that is not an event; a malformed secret is a SvcValidationError that does not repeat it", () => {
    for (const payload of ["[]", '"text"', '{"type":"x"}', "not json"]) {
      expect(refusal(() => verifyWebhook(payload, signed(payload), secret)).reason, payload).toBe(
        "invalid_payload",
      );
    }
    const bad = "whsec_!!not base64!!";
    let error: unknown;
    try {
      verifyWebhook(body, signed(body), bad);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(SvcValidationError);
    expect(error).toMatchObject({ reason: "invalid_secret" });
    expect((error as Error).message).not.toContain("not base64");
  });
});
