/**
 * One paid fetch, end to end on the wire: request the resource; on 402 read the challenge, choose a
 * requirement, have the caller's `pay` produce the signed payment (it applies the policy, reserves and
 * records first: the spend pipeline's work, not this module's), retry once with the payment header, and
 * read the receipt. Never pays twice for one challenge: `pay` is called at most once.
 */
import {
  type PaymentChallenge,
  type PaymentConstraints,
  parsePaymentChallenge,
  type SelectedRequirement,
  selectRequirement,
} from "./challenge.ts";
import { decodeHeaderJson, isJsonObject } from "./encoding.ts";
import {
  headersForOrigin,
  type OutboundFetcher,
  type OutboundRequest,
  type OutboundResponse,
} from "./outbound-fetch.ts";
import type { SignedPayment } from "./payment.ts";
import { decodePaymentReceipt, type PaymentReceipt } from "./receipt.ts";

/** Sent unless the caller sets them: some servers show browsers an HTML paywall instead of a challenge. */
const DEFAULT_HEADERS = { accept: "application/json", "user-agent": "svc-x402/1" } as const;

/** Input of {@link fetchWithPayment}. */
export interface PaidFetchInput {
  request: OutboundRequest;
  constraints: PaymentConstraints;
  /**
   * Produces the payment for the chosen requirement, once: admits it under the wallet's policy, reserves
   * and records it, then signs (with {@link signPayment}). Throwing refuses the payment; nothing is sent.
   * `url` is the resource that asked for the payment (where redirects led), which the payment goes to.
   * Absent, nothing is paid: the first answer, a 402 included, is the result (a probe).
   */
  pay?(choice: {
    challenge: PaymentChallenge;
    selected: SelectedRequirement;
    url: string;
  }): Promise<SignedPayment>;
}

/** How a paid fetch ended. */
export type PaidFetchResult =
  /** Nothing was paid: the resource asked for no payment, or the caller only asked (a 402 is then here). */
  | { outcome: "unpaid"; response: OutboundResponse }
  /** Paid, and the retry was answered other than 402 (`receipt` says whether the server settled). */
  | {
      outcome: "paid";
      response: OutboundResponse;
      challenge: PaymentChallenge;
      selected: SelectedRequirement;
      payment: SignedPayment;
      receipt: PaymentReceipt | undefined;
    }
  /** Paid, and the retry was answered 402 again: the payment was rejected, `reason` says why. */
  | {
      outcome: "rejected";
      response: OutboundResponse;
      challenge: PaymentChallenge;
      selected: SelectedRequirement;
      payment: SignedPayment;
      receipt: PaymentReceipt | undefined;
      reason: string;
    }
  /**
   * Paid, and the retry got no answer (timeout, connection lost): the payment may still settle, so its
   * outcome must be read from the chain (`payment.onChain`).
   */
  | {
      outcome: "unknown";
      error: unknown;
      challenge: PaymentChallenge;
      selected: SelectedRequirement;
      payment: SignedPayment;
    };

/**
 * Fetches `request.url`, paying a 402 once. Errors before anything is signed (a refused destination, an
 * unreadable challenge, no payable requirement, a refusal from `pay`) are thrown; after signing, every
 * ending is returned, so the caller can complete what it recorded.
 *
 * @example
 * ```ts
 * const result = await fetchWithPayment(outbound, {
 *   request: { url },
 *   constraints: { chains: walletChains, maxAmount: "0.05" },
 *   pay: async ({ challenge, selected }) => signPayment({ challenge, selected, privateKey, now: new Date() }),
 * });
 * if (result.outcome === "paid") result.receipt?.transaction; // "0x…"
 * ```
 */
export async function fetchWithPayment(
  fetcher: OutboundFetcher,
  input: PaidFetchInput,
): Promise<PaidFetchResult> {
  const headers = withDefaults(input.request.headers ?? {});
  const first = await fetcher.fetch({ ...input.request, headers });
  if (first.status !== 402 || !input.pay) return { outcome: "unpaid", response: first };
  const challenge = parsePaymentChallenge(first);
  const selected = selectRequirement(challenge, input.constraints);
  const payment = await input.pay({ challenge, selected, url: first.url });
  let retry: OutboundResponse;
  try {
    // The payment goes to the resource that asked for it, as redirects reached it: sent to the URL first
    // asked, it would be dropped on the way by a redirect to another origin (http to https is one).
    const method = (input.request.method ?? "GET").toUpperCase();
    const body = first.method === method ? input.request.body : undefined;
    retry = await fetcher.fetch({
      url: first.url,
      method: first.method,
      headers: {
        ...headersForOrigin(headers, input.request.url, first.url),
        [payment.header.name]: payment.header.value,
      },
      ...(body === undefined ? {} : { body }),
    });
  } catch (error) {
    return { outcome: "unknown", error, challenge, selected, payment };
  }
  const receipt = decodePaymentReceipt(retry.headers);
  if (retry.status === 402) {
    return {
      outcome: "rejected",
      response: retry,
      challenge,
      selected,
      payment,
      receipt,
      reason: rejectionReason(retry, receipt),
    };
  }
  return { outcome: "paid", response: retry, challenge, selected, payment, receipt };
}

function withDefaults(headers: Readonly<Record<string, string>>): Record<string, string> {
  const given = new Set(Object.keys(headers).map((name) => name.toLowerCase()));
  const out: Record<string, string> = { ...headers };
  for (const [name, value] of Object.entries(DEFAULT_HEADERS)) if (!given.has(name)) out[name] = value;
  return out;
}

/** The server's reason for a 402 after paying: the receipt's, the challenge's `error`, or a plain statement. */
function rejectionReason(response: OutboundResponse, receipt: PaymentReceipt | undefined): string {
  if (receipt?.errorReason) return receipt.errorReason;
  const header = response.headers.get("payment-required");
  const document = header === null ? parseJson(response.body.toString("utf8")) : decodeHeaderJson(header);
  if (isJsonObject(document) && typeof document.error === "string" && document.error !== "") {
    return document.error.slice(0, 500);
  }
  return "the server answered 402 again without a reason";
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
