/**
 * x402 on the client side: reading a 402's challenge (for the gate, which must know what it authorizes
 * before the service pays), and turning the service's paid-fetch answer back into a standard `Response`.
 * Web globals only (`atob`, `TextDecoder`, `Response`), so it runs in browsers too.
 */
import { SvcError } from "./errors.ts";
import type { Chain, ChainToken, PaidFetchResult, PaymentReceipt, Transaction } from "./types.ts";

/** The v2 challenge header. */
const PAYMENT_REQUIRED_HEADER = "payment-required";
const ATOMIC_AMOUNT = /^[1-9]\d{0,77}$/;
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
const BASE64URL = /^[A-Za-z0-9_-]+$/;

/** v1 network names of the chains a local or test deployment can serve (the rest of v1's list is public mainnets). */
const V1_NETWORKS: Readonly<Record<string, string>> = {
  base: "eip155:8453",
  "base-sepolia": "eip155:84532",
  ethereum: "eip155:1",
  sepolia: "eip155:11155111",
  polygon: "eip155:137",
  "polygon-amoy": "eip155:80002",
  avalanche: "eip155:43114",
  "avalanche-fuji": "eip155:43113",
  solana: "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp",
  "solana-devnet": "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1",
  "solana-testnet": "solana:4uhcVJyU9pJkvQyS88uRDiswHXSCkY3z",
};
const CAIP2 = /^[-a-z0-9]{3,8}:[-_a-zA-Z0-9]{1,32}$/;

/** One `exact` payment a challenge offers, as far as the gate needs it. */
export interface X402Requirement {
  /** CAIP-2 id of the network (v1 names mapped). */
  network: string;
  /** Atomic units (v1 `maxAmountRequired`, v2 `amount`). */
  amount: bigint;
  /** Token contract or mint, as sent. */
  asset: string;
  /** The payee, as sent. */
  payTo: string;
}

/** A 402's challenge: its version, the server's `error` text, and the `exact` requirements in its order. */
export interface X402Challenge {
  version: 1 | 2;
  error: string | undefined;
  requirements: X402Requirement[];
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Standard (or URL-safe, unpadded) base64 to bytes. */
function base64Bytes(text: string): Uint8Array<ArrayBuffer> {
  const standard = text.replace(/-/g, "+").replace(/_/g, "/");
  const padded = standard + "=".repeat((4 - (standard.length % 4)) % 4);
  const binary = atob(padded);
  const bytes = new Uint8Array(new ArrayBuffer(binary.length));
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

/** base64 of UTF-8 JSON (an x402 header value); undefined when it is not that. */
function decodeHeaderJson(value: string): unknown {
  const text = value.trim();
  if (!BASE64.test(text) && !BASE64URL.test(text)) return undefined;
  try {
    return JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(base64Bytes(text)));
  } catch {
    return undefined;
  }
}

function invalidChallenge(message: string): SvcError {
  return new SvcError({ code: "X402Error", status: 0, message, reason: "invalid_payment_challenge" });
}

/**
 * Reads the challenge of a 402: the `PAYMENT-REQUIRED` header when present (v2), else the JSON body (v1,
 * or a v2 document in the body). Entries of other schemes or with unreadable amounts are left out; throws
 * {@link SvcError} (reason `invalid_payment_challenge`) when there is no challenge at all.
 * @example
 * const challenge = parseX402Challenge(response.headers, await response.text());
 * challenge.requirements[0]?.amount; // 10000n
 */
export function parseX402Challenge(headers: Headers, bodyText: string): X402Challenge {
  let document: unknown;
  const header = headers.get(PAYMENT_REQUIRED_HEADER);
  if (header !== null) {
    document = decodeHeaderJson(header);
    if (!isObject(document) || document.x402Version !== 2) {
      throw invalidChallenge("The 402's PAYMENT-REQUIRED header is not base64 of an x402 v2 challenge");
    }
  } else {
    try {
      document = JSON.parse(bodyText);
    } catch {
      document = undefined;
    }
    if (!isObject(document) || (document.x402Version !== 1 && document.x402Version !== 2)) {
      throw invalidChallenge(
        "The 402 carries no x402 challenge: no PAYMENT-REQUIRED header and no x402Version 1 or 2 in the body",
      );
    }
  }
  const version = document.x402Version as 1 | 2;
  if (!Array.isArray(document.accepts))
    throw invalidChallenge(`The x402 v${version} challenge has no accepts list`);
  const amountField = version === 1 ? "maxAmountRequired" : "amount";
  const requirements: X402Requirement[] = [];
  for (const entry of document.accepts as unknown[]) {
    if (!isObject(entry) || entry.scheme !== "exact" || typeof entry.network !== "string") continue;
    const network = Object.hasOwn(V1_NETWORKS, entry.network)
      ? V1_NETWORKS[entry.network]
      : CAIP2.test(entry.network)
        ? entry.network
        : undefined;
    const amount = entry[amountField];
    if (network === undefined || typeof amount !== "string" || !ATOMIC_AMOUNT.test(amount)) continue;
    if (typeof entry.asset !== "string" || entry.asset === "") continue;
    if (typeof entry.payTo !== "string" || entry.payTo === "") continue;
    requirements.push({ network, amount: BigInt(amount), asset: entry.asset, payTo: entry.payTo });
  }
  return {
    version,
    error: typeof document.error === "string" ? document.error : undefined,
    requirements,
  };
}

/** EVM's zero address and Solana's all-zero key (the System Program), lowercased. */
const NO_RECIPIENTS = new Set([`0x${"0".repeat(40)}`, "11111111111111111111111111111111"]);

/**
 * The first requirement (the server's order) that the wallet can pay: a network among `chains` (the
 * wallet's, narrowed to one by the caller's `chain`), a token that chain serves, a payee the service pays
 * (not the contract or mint of a token any of the `served` chains of its kind serves), and no more than
 * `maxAtomic` of it when given. Undefined when none; the service then refuses too, with its reasons.
 */
export function chooseRequirement(
  challenge: X402Challenge,
  chains: readonly Chain[],
  maxAmount: ((token: ChainToken) => bigint) | undefined,
  served: readonly Chain[] = chains,
): { requirement: X402Requirement; chain: Chain; token: ChainToken } | undefined {
  for (const requirement of challenge.requirements) {
    const chain = chains.find((candidate) => candidate.network === requirement.network);
    if (chain === undefined) continue;
    const same = (a: string, b: string) =>
      chain.kind === "evm" ? a.toLowerCase() === b.toLowerCase() : a === b;
    const token = chain.tokens.find((candidate) => same(candidate.address, requirement.asset));
    if (token === undefined) continue;
    // A payee the service refuses to pay (no recipient: the zero address, a served token's contract or
    // mint) is passed over here too, so that the offer authorized is the offer the service pays.
    if (NO_RECIPIENTS.has(requirement.payTo.toLowerCase())) continue;
    const tokensOfKind = served.filter((other) => other.kind === chain.kind).flatMap((other) => other.tokens);
    if (tokensOfKind.some((candidate) => same(candidate.address, requirement.payTo))) continue;
    if (maxAmount !== undefined && requirement.amount > maxAmount(token)) continue;
    return { requirement, chain, token };
  }
  return undefined;
}

/**
 * A standard `Response` with the x402 payment made for it, if any. `receipt` is the server's settlement
 * receipt (`PAYMENT-RESPONSE` / `X-PAYMENT-RESPONSE`), `transaction` the wallet's `x402` transaction.
 * Both are undefined when the resource asked for no payment (the response then is the resource's own).
 * @example
 * const response = await wallet.fetch("https://api.example.com/weather");
 * await response.json(); response.receipt?.txHash; response.transaction?.status; // "confirmed"
 */
export type PaidResponse = Response & {
  readonly receipt: PaymentReceipt | undefined;
  readonly transaction: Transaction | undefined;
  /** The amount paid, in whole tokens, e.g. `"0.01"`. */
  readonly amountCharged: string | undefined;
};

/** Statuses whose responses have no body (the `Response` constructor refuses one). */
const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304]);
/** Headers that describe the bytes on the wire, which the rebuilt body no longer are. */
const WIRE_HEADERS = new Set(["content-length", "content-encoding", "transfer-encoding"]);

/**
 * Rebuilds the resource's answer from `POST /v1/x402/fetch`'s: its status, headers and body (JSON
 * re-serialized, text as is, base64 decoded to bytes).
 */
export function responseFromPaidFetch(result: PaidFetchResult): PaidResponse {
  const headers = new Headers();
  for (const [name, value] of Object.entries(result.headers ?? {})) {
    if (!WIRE_HEADERS.has(name.toLowerCase())) headers.append(name, value);
  }
  let body: ConstructorParameters<typeof Response>[0];
  if (NULL_BODY_STATUSES.has(result.status)) body = null;
  else if (result.bodyEncoding === "base64" && typeof result.body === "string")
    body = base64Bytes(result.body);
  else if (typeof result.body === "string") body = result.body;
  else body = JSON.stringify(result.body);
  // The constructor accepts 200–599; a resource answering outside it is still described by `status`.
  const response = new Response(body, {
    status: result.status >= 200 && result.status <= 599 ? result.status : 200,
    headers,
  });
  return withPayment(response, result.paymentReceipt, result.transaction, result.amountCharged);
}

/** `response` with the payment's facts attached (all undefined for a response nobody paid for). */
export function withPayment(
  response: Response,
  receipt: PaymentReceipt | undefined,
  transaction: Transaction | undefined,
  amountCharged: string | undefined,
): PaidResponse {
  return Object.defineProperties(response, {
    receipt: { value: receipt, enumerable: true },
    transaction: { value: transaction, enumerable: true },
    amountCharged: { value: amountCharged, enumerable: true },
  }) as PaidResponse;
}

/**
 * Why the resource refused a payment it was sent (it answered 402 again): the receipt's `errorReason`, the
 * new challenge's `error`, or the wallet transaction's failure reason.
 */
export function rejectionReason(result: PaidFetchResult): string {
  if (result.paymentReceipt?.errorReason) return result.paymentReceipt.errorReason;
  const headers = new Headers(result.headers ?? {});
  try {
    const text = typeof result.body === "string" ? result.body : JSON.stringify(result.body);
    const challenge = parseX402Challenge(headers, result.bodyEncoding === "base64" ? "" : text);
    if (challenge.error) return challenge.error;
  } catch {
    // No readable challenge in the second 402: fall back to what the service recorded.
  }
  return result.transaction?.failureReason ?? "the resource answered 402 to the payment";
}
