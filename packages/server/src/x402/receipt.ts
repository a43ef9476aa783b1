import { decodeHeaderJson, isJsonObject } from "./encoding.ts";

/** The receipt a resource server returns with a paid response, as it sent it and as read. */
export interface PaymentReceipt {
  /** Which header carried it: v2 `PAYMENT-RESPONSE`, v1 `X-PAYMENT-RESPONSE`. */
  header: "PAYMENT-RESPONSE" | "X-PAYMENT-RESPONSE";
  /** The header value as sent. */
  value: string;
  /** Its JSON, when it is base64 of a JSON object. */
  decoded: Readonly<Record<string, unknown>> | undefined;
  success: boolean | undefined;
  /** Settlement transaction hash (EVM) or signature (Solana); may be empty on failure. */
  transaction: string | undefined;
  network: string | undefined;
  payer: string | undefined;
  errorReason: string | undefined;
}

/**
 * Reads the settlement receipt of a response (`PAYMENT-RESPONSE`, or v1's `X-PAYMENT-RESPONSE`); undefined
 * when there is none. Lenient: fields of the wrong type read as undefined, the header is kept as sent.
 *
 * @example
 * ```ts
 * decodePaymentReceipt(response.headers);
 * // { header: "PAYMENT-RESPONSE", success: true, transaction: "0x5f…", network: "eip155:8453", payer: "0x…", … }
 * ```
 */
export function decodePaymentReceipt(headers: Headers): PaymentReceipt | undefined {
  const v2 = headers.get("payment-response");
  const v1 = v2 === null ? headers.get("x-payment-response") : null;
  const value = v2 ?? v1;
  if (value === null) return undefined;
  const document = decodeHeaderJson(value);
  const decoded = isJsonObject(document) ? document : undefined;
  const text = (field: string) =>
    typeof decoded?.[field] === "string" ? (decoded[field] as string) : undefined;
  return {
    header: v2 !== null ? "PAYMENT-RESPONSE" : "X-PAYMENT-RESPONSE",
    value,
    decoded,
    success: typeof decoded?.success === "boolean" ? decoded.success : undefined,
    transaction: text("transaction"),
    network: text("network"),
    payer: text("payer"),
    errorReason: text("errorReason"),
  };
}
