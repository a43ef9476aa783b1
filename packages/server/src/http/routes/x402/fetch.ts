import { z } from "zod";
import { errors } from "../../../internal/errors.ts";
import { toTransactionView } from "../../../transactions/transactions.ts";
import { MAX_JSON_DEPTH, nestsDeeperThan } from "../../../x402/encoding.ts";
import type { OutboundResponse } from "../../../x402/outbound-fetch.ts";
import { fetchAndPay } from "../../../x402/pay.ts";
import type { PaymentReceipt } from "../../../x402/receipt.ts";
import { mayActOnWallet } from "../../access.ts";
import { errorResponses, idParam, jsonResponse, transactionView } from "../../schemas.ts";
import { spendAsker, spendDeps } from "../../spend-deps.ts";
import { type App, principalOf, type Services } from "../../types.ts";

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}$/;
/** Header values as HTTP allows them: visible characters, spaces and tabs. */
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

const fetchBody = z
  .strictObject({
    walletId: idParam("wal"),
    url: z
      .string()
      .max(2048)
      .regex(/^https?:\/\//i, "must be an http:// or https:// URL"),
    method: z.enum(["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"]).optional(),
    headers: z
      .record(
        z.string().regex(HEADER_NAME, "must be an HTTP header name"),
        z.string().max(8192).regex(HEADER_VALUE, "must be a valid HTTP header value"),
      )
      .refine((headers) => Object.keys(headers).length <= 64, "at most 64 headers")
      .optional(),
    body: z
      .union([z.string(), z.record(z.string(), z.unknown()), z.array(z.unknown())])
      .optional()
      .meta({
        description: "Sent as is when a string; JSON-encoded (with Content-Type application/json) otherwise",
      }),
    chain: z.string().min(1).max(64).optional(),
    maxAmount: z
      .string()
      .regex(/^(0|[1-9]\d{0,30})(\.\d{1,18})?$/, 'must be a decimal amount of the token, e.g. "0.05"')
      .optional()
      .meta({
        description: "The most to pay, in whole tokens (USDC): a dearer price is refused, nothing signed",
      }),
    spendAuthorization: z.strictObject({ decisionId: z.string().min(1).max(200) }).optional(),
    probe: z
      .boolean()
      .optional()
      .meta({
        description:
          "Ask the resource once and pay nothing: its answer, a 402 challenge included, is returned as is " +
          "(what a client's spend gate reads before it authorizes the payment)",
      }),
  })
  .refine((input) => input.body === undefined || !["GET", "HEAD"].includes(input.method ?? "GET"), {
    message: "a GET or HEAD request has no body; set method",
    path: ["body"],
  })
  .refine((input) => !(input.probe && input.spendAuthorization), {
    message: "a probe pays nothing, so it takes no spendAuthorization",
    path: ["spendAuthorization"],
  })
  .meta({
    example: {
      walletId: "wal_4bG7hQ2nR8sT1vX3yZ5aC9",
      url: "https://api.example.com/weather",
      maxAmount: "0.05",
    },
  });

const paidFetchView = z
  .object({
    status: z.number().int().meta({ description: "the resource's HTTP status" }),
    headers: z.record(z.string(), z.string()),
    body: z.unknown().meta({
      description: "parsed JSON when the resource answered JSON, else text; binary as base64 (bodyEncoding)",
    }),
    bodyEncoding: z.literal("base64").optional(),
    paymentReceipt: z
      .object({
        success: z.boolean().optional(),
        txHash: z.string().optional(),
        network: z.string().optional(),
        payer: z.string().optional(),
        errorReason: z.string().optional(),
      })
      .optional()
      .meta({
        description:
          "the settlement receipt, as the resource sent it (PAYMENT-RESPONSE / X-PAYMENT-RESPONSE)",
      }),
    amountCharged: z
      .string()
      .optional()
      .meta({ description: "the amount paid, in whole tokens", example: "0.01" }),
    transactionId: z.string().optional(),
    transaction: transactionView.optional(),
    spendDecisionId: z.string().optional(),
  })
  .meta({
    id: "PaidFetch",
    description: "The resource's answer to a fetch, and the x402 payment made for it, if any",
    example: {
      status: 200,
      headers: { "content-type": "application/json; charset=utf-8" },
      body: { city: "Lisbon", forecast: "sunny" },
      paymentReceipt: {
        success: true,
        txHash: "0x5c504ed432cb51138bcf09aa5e8a410dd4a1e204ef84bfed1be16dfba1b22060",
        network: "eip155:8453",
        payer: "0x8ba1f109551bD432803012645Ac136ddd64DBA72",
      },
      amountCharged: "0.01",
      transactionId: "tx_7kLmN3pQ9rS2tU5vW8xY1z",
    },
  });

/**
 * x402 fetches of one account running at once, at most (on this instance): each holds up to 2 MiB of the
 * resource's answer for up to `SVC_X402_FETCH_TIMEOUT_MS` (20 s by default), so one agent key could otherwise
 * hold hundreds, and the memory with them.
 */
export const MAX_FETCHES_PER_ACCOUNT = 8;

/** POST /v1/x402/fetch: fetch a URL for a wallet, paying an x402 challenge within the wallet's policy. */
export function registerX402Fetch(app: App, services: Services): void {
  /** Fetches running now, by account. */
  const running = new Map<string, number>();
  app.route({
    method: "POST",
    url: "/v1/x402/fetch",
    config: {
      auth: "account",
      role: "agent",
      idempotency: {
        // A process that died after recording the payment: the resource's answer is lost, the payment is
        // not redone; its transaction completes from the chain.
        resume: (_request, row) => {
          throw errors.paymentOutcomeUnknown(
            row.id,
            "The first attempt of this request ended without an answer",
          );
        },
        // What paid nothing is not kept (a resource's answer is up to 2 MiB): a retry asks again, and pays
        // at most once whatever it meets.
        remember: (response) =>
          (response.body as { transactionId?: string } | null)?.transactionId !== undefined,
      },
    },
    schema: {
      operationId: "fetchPaidResource",
      tags: ["x402"],
      summary: "Fetch a URL, paying an x402 challenge (HTTP 402) from a wallet within its policy",
      description:
        "Fetches `url`; on 402 reads the challenge (v1 body or v2 `PAYMENT-REQUIRED`), picks the first " +
        "requirement the wallet can pay (its chains, `chain`, `maxAmount`), applies the policy (paused, " +
        "maxPerTx, dailyLimit, whitelist by payee or hostname, requireSpendAuthorization), records an `x402` " +
        "transaction and signs, retries once with the payment, and answers the resource's response. A " +
        "refused payment records nothing. With `probe`, the resource is asked once and its answer returned " +
        "unpaid, a 402 included. Private, loopback and link-local destinations are refused (400 " +
        "`destination_not_allowed`) unless `SVC_OUTBOUND_ALLOW` exempts them. Honours Idempotency-Key: a " +
        "retry never pays twice.",
      body: fetchBody,
      response: {
        200: jsonResponse("The resource's answer, and the payment made for it", paidFetchView),
        ...errorResponses(
          [
            400,
            "ValidationError: invalid body, `destination_not_allowed`, `no_payable_requirement`, `max_amount_exceeded`",
          ],
          [
            403,
            "PolicyViolation: the wallet's policy refuses the payment (`max_per_tx`, `daily_limit`, `recipient_not_allowed`, `policy_paused`, `spend_authorization_*`), or Forbidden `insufficient_role`",
          ],
          404,
          [
            409,
            "ValidationError: `wallet_archived`, `idempotency_key_reused`, `idempotency_key_in_use`, or `payment_not_unique`: another instance recorded a payment identical to this one at the same moment; nothing was sent, a retry signs a different one",
          ],
          422,
          [
            429,
            "RateLimitExceeded: too many requests, or `too_many_fetches`: 8 of the account's fetches are running",
          ],
          [
            502,
            "InternalError: the resource did not answer usably (`resource_unreachable`, `resource_timeout`, `resource_too_large`, `too_many_redirects`, `invalid_payment_challenge`), or the paid request got no answer (`payment_outcome_unknown`: its transaction completes from the chain), or a chain is unreachable",
          ],
        ),
      },
    },
    handler: async (request) => {
      const principal = principalOf(request);
      const { walletId, body, headers, spendAuthorization, ...rest } = request.body;
      if (!mayActOnWallet(principal, walletId)) throw errors.walletNotFound(walletId);
      const account = principal.accountId;
      const busy = running.get(account) ?? 0;
      if (busy >= MAX_FETCHES_PER_ACCOUNT) throw errors.tooManyFetches(MAX_FETCHES_PER_ACCOUNT);
      running.set(account, busy + 1);
      try {
        const outgoingHeaders: Record<string, string> = { ...headers };
        let outgoingBody: string | undefined;
        if (typeof body === "string") outgoingBody = body;
        else if (body !== undefined) {
          outgoingBody = JSON.stringify(body);
          if (!Object.keys(outgoingHeaders).some((name) => name.toLowerCase() === "content-type")) {
            outgoingHeaders["content-type"] = "application/json";
          }
        }
        const paid = await fetchAndPay(
          { ...spendDeps(services), outbound: services.outbound },
          principal.accountId,
          {
            walletId,
            ...rest,
            headers: outgoingHeaders,
            body: outgoingBody,
            spendDecisionId: spendAuthorization?.decisionId,
          },
          spendAsker(request),
        );
        const transaction = paid.transaction ? toTransactionView(paid.transaction) : undefined;
        return {
          status: paid.response.status,
          headers: headersOf(paid.response),
          ...bodyOf(paid.response),
          ...(paid.receipt ? { paymentReceipt: receiptView(paid.receipt) } : {}),
          ...(paid.amountCharged === undefined ? {} : { amountCharged: paid.amountCharged }),
          ...(transaction
            ? {
                transactionId: transaction.id,
                transaction,
                ...(transaction.spendDecisionId ? { spendDecisionId: transaction.spendDecisionId } : {}),
              }
            : {}),
        };
      } finally {
        const left = (running.get(account) ?? 1) - 1;
        if (left > 0) running.set(account, left);
        else running.delete(account);
      }
    },
  });
}

function headersOf(response: OutboundResponse): Record<string, string> {
  const out: Record<string, string> = {};
  response.headers.forEach((value, name) => {
    out[name] = value;
  });
  return out;
}

/** JSON parsed (unless it nests past any real answer: then as text), text as text, anything else base64. */
function bodyOf(response: OutboundResponse): { body: unknown; bodyEncoding?: "base64" } {
  const type = (response.headers.get("content-type") ?? "").toLowerCase();
  const text = () => response.body.toString("utf8");
  if (response.body.length === 0) return { body: "" };
  if (/^application\/([\w.-]+\+)?json\b/.test(type)) {
    try {
      const parsed: unknown = JSON.parse(text());
      return { body: nestsDeeperThan(parsed, MAX_JSON_DEPTH) ? text() : parsed };
    } catch {
      return { body: text() };
    }
  }
  if (
    /^text\/|^application\/([\w.-]+\+)?xml\b|^application\/(javascript|x-www-form-urlencoded)\b/.test(type)
  ) {
    return { body: text() };
  }
  return { body: response.body.toString("base64"), bodyEncoding: "base64" };
}

/** The receipt's fields as the server sent them, under api.md's names. */
function receiptView(receipt: PaymentReceipt) {
  return {
    ...(receipt.success === undefined ? {} : { success: receipt.success }),
    ...(receipt.transaction ? { txHash: receipt.transaction } : {}),
    ...(receipt.network === undefined ? {} : { network: receipt.network }),
    ...(receipt.payer === undefined ? {} : { payer: receipt.payer }),
    ...(receipt.errorReason === undefined ? {} : { errorReason: receipt.errorReason }),
  };
}
