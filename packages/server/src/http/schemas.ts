import { z } from "zod";
import type { ChainRegistry } from "../chains/registry.ts";
import { InexactNumber } from "../internal/exact-json.ts";
import { policyInputSchema } from "../policy/policy.ts";
import { whitelistEntryProblem } from "../policy/whitelist.ts";
import { TRANSACTION_STATUSES } from "../transactions/transactions.ts";

/**
 * Shapes shared by several routes, and the helpers that declare responses. A shape with an `id` is one
 * component of the OpenAPI document, referenced wherever it is used (see openapi.ts).
 */

export const errorResponse = z
  .object({
    error: z.object({
      code: z.string().meta({ description: "one of the spec's error codes", example: "NotFound" }),
      message: z.string(),
      requestId: z.string().meta({ description: "the same as the X-Request-Id header" }),
      reason: z.string().optional().meta({ description: "a snake_case sub-code a client can branch on" }),
      details: z.record(z.string(), z.unknown()).optional().meta({ description: "facts about the refusal" }),
    }),
  })
  .meta({
    id: "Error",
    description: "The body of every error response (api.md, Errors)",
    example: {
      error: {
        code: "ValidationError",
        message: "Wallet wal_4bG7hQ2nR8sT1vX3yZ5aC9 is archived",
        requestId: "req_Uv94OAXuJU2f3V5d",
        reason: "wallet_archived",
      },
    },
  });

/**
 * A JSON response of a route's schema, with what it means: the OpenAPI document shows `description` as the
 * response's description.
 * @example response: { 200: jsonResponse("The wallet", walletView) }
 */
export function jsonResponse<Schema extends z.ZodType>(description: string, schema: Schema) {
  return { description, content: { "application/json": { schema } } };
}

/** A 204: no body. */
export function noContent(description: string) {
  return z.null().meta({ description });
}

/** What each error status means, in every route's OpenAPI responses. */
const ERROR_MEANINGS: Record<number, string> = {
  400: "ValidationError: malformed JSON, or a body, query or path parameter that fails validation (`invalid_body`, `invalid_query`, `invalid_params`, …)",
  401: "Unauthorized: missing, invalid, revoked or expired credential",
  403: "Forbidden `insufficient_role`: the credential's role does not allow this",
  404: "NotFound: absent, or not visible to this credential",
  409: "ValidationError: the resource's state forbids this (`wallet_archived`, `email_taken`, `idempotency_key_reused`, `idempotency_key_in_use`)",
  413: "ValidationError `body_too_large`: the body exceeds 64 KiB",
  415: "ValidationError `unsupported_media_type`: a body that is not `application/json`",
  422: "InsufficientFunds: not enough of the token, or of the native coin for the fee (`insufficient_token`, `insufficient_gas`)",
  429: "RateLimitExceeded: too many requests; retry after the `Retry-After` header's seconds",
  500: "InternalError: an unexpected fault; the request id locates it in the log",
  502: "InternalError: the chain's RPC endpoint or the authorization daemon is not answering, the node refused a read (perhaps for a while), or the network rejected the transaction (`chain_unavailable`, `chain_read_refused`, `broadcast_rejected`, `authzd_unavailable`)",
  503: "InternalError `store_unavailable`: the store is not answering",
};

/**
 * Error responses of a route's schema, each with the common meaning of its status or, as
 * `[status, description]`, the route's own. Those the service's hooks give are added to every route they
 * run on (openapi.ts): a route lists only its own.
 * @example response: { 200: …, ...errorResponses(404, [403, "PolicyViolation: …"]) }
 */
export function errorResponses(...statuses: (number | [number, string])[]) {
  const entries = statuses.map((entry) => {
    const [status, description] = typeof entry === "number" ? [entry, ERROR_MEANINGS[entry] ?? ""] : entry;
    return [status, jsonResponse(description, errorResponse)] as const;
  });
  return Object.fromEntries(entries);
}

export const timestamp = z.string().meta({ format: "date-time", example: "2026-01-01T00:00:00.000Z" });

/** Resource ids in paths: the prefix and base62, bounded so junk never reaches the store. */
export const idParam = (prefix: string) =>
  z.string().regex(new RegExp(`^${prefix}_[0-9A-Za-z]{1,64}$`), `must be a ${prefix}_ identifier`);

/** The path parameters of every route under `/v1/wallets/:id`. */
export const walletPathParams = z.object({ id: idParam("wal") });

/** The largest page a list serves; a larger `limit` is served as this (spec 8). */
export const MAX_PAGE_SIZE = 100;

export const integerQuery = (name: string, min: number, max: number) =>
  z
    .string()
    .regex(/^\d{1,10}$/, `${name} must be a non-negative integer`)
    .transform(Number)
    .pipe(z.number().int().min(min).max(max));

/** The paging parameters of every list, for its strict query schema: `limit` (≥ 1) and `offset` (≥ 0). */
export const pageQuery = {
  limit: integerQuery("limit", 1, 1_000_000_000).optional(),
  offset: integerQuery("offset", 0, 1_000_000_000).optional(),
};

export const walletView = z
  .object({
    id: z.string(),
    name: z.string(),
    chains: z.array(z.string()),
    evm: z.object({ address: z.string() }).optional(),
    solana: z.object({ address: z.string() }).optional(),
    metadata: z.record(z.string(), z.unknown()),
    status: z.enum(["active", "archived"]),
    createdAt: timestamp,
  })
  .meta({
    id: "Wallet",
    description: "A wallet: its addresses on each kind of chain it holds (spec 2.3, api.md Wallets)",
    example: {
      id: "wal_4bG7hQ2nR8sT1vX3yZ5aC9",
      name: "trading agent",
      chains: ["base", "solana"],
      evm: { address: "0x8ba1f109551bD432803012645Ac136ddd64DBA72" },
      solana: { address: "9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin" },
      metadata: { team: "research" },
      status: "active",
      createdAt: "2026-01-01T00:00:00.000Z",
    },
  });

/** A transaction as the examples of the OpenAPI document show it. */
export const transactionExample = {
  id: "tx_7kLmN3pQ9rS2tU5vW8xY1z",
  walletId: "wal_4bG7hQ2nR8sT1vX3yZ5aC9",
  type: "send",
  amount: "2.5",
  token: "USDC",
  chain: "base",
  to: "0x000000000000000000000000000000000000dEaD",
  from: "0x8ba1f109551bD432803012645Ac136ddd64DBA72",
  txHash: "0x5c504ed432cb51138bcf09aa5e8a410dd4a1e204ef84bfed1be16dfba1b22060",
  timestamp: "2026-01-01T00:00:00.000Z",
  status: "pending",
};

export const transactionView = z
  .object({
    id: z.string(),
    walletId: z.string(),
    type: z.enum(["send", "receive", "x402"]),
    amount: z.string().meta({ description: "decimal amount in token units", example: "10.5" }),
    token: z.string(),
    chain: z.string(),
    to: z.string(),
    from: z.string(),
    txHash: z.string().optional(),
    timestamp: timestamp.meta({
      description:
        "When the service recorded it: a spend when it was admitted (or held), a receive when the service saw it",
    }),
    status: z.enum(TRANSACTION_STATUSES).meta({
      description:
        "pending → confirmed | failed; a spend held for approval: pending_approval → pending (approved) | rejected (rejected or expired)",
    }),
    confirmedAt: timestamp.optional().meta({
      description:
        "A transfer: the time of the block it landed in, by the chain's clock (whole seconds on EVM), so it can read a moment before `timestamp`; an x402 payment: when the service learned its facilitator had settled it. Absent until then",
    }),
    failureReason: z.string().optional().meta({
      description:
        "Why it failed or was rejected: for a failure, a sentence naming what refused it (the node, the chain, an x402 resource); for a held spend, `approval_rejected`, `approval_expired` or `requester_revoked` (the key that asked for it was revoked)",
    }),
    spendDecisionId: z.string().optional(),
    resource: z.string().optional().meta({ description: "x402: the URL of the resource paid for" }),
    approval: z
      .object({
        status: z.enum(["pending", "approved", "rejected", "expired"]),
        expiresAt: timestamp,
        decidedAt: timestamp.optional(),
      })
      .optional()
      .meta({ description: "a spend above the policy's approvalAbove: the owner's decision" }),
    fee: z
      .object({
        amount: z
          .string()
          .meta({ description: "decimal amount in the native coin's units", example: "0.000005" }),
        token: z.string().meta({ description: "the chain's native coin", example: "SOL" }),
      })
      .optional()
      .meta({
        description:
          "A spend that landed on chain (confirmed, or failed there): what it cost the wallet in the chain's native coin beyond its amount, as the chain tells it: the network fee and, on Solana, the rent of a token account it opened for its recipient. Absent until then, and for receives and x402 payments (their facilitator pays)",
      }),
  })
  .meta({
    id: "Transaction",
    description: "A send, receive or x402 payment of a wallet (spec 2.5, api.md Spends)",
    example: transactionExample,
  });

/** A response answering one Transaction, as sends, faucet payments and reads do. */
export function transactionResponse(description: string) {
  return jsonResponse(description, transactionView);
}

export const apiKeyView = z
  .object({
    id: z.string(),
    name: z.string(),
    role: z.enum(["admin", "agent", "read"]),
    walletIds: z
      .array(z.string())
      .nullable()
      .meta({ description: "the wallets the key may see and act on; null = every wallet of the account" }),
    expiresAt: timestamp.nullable(),
    createdAt: timestamp,
    lastUsed: timestamp.nullable(),
  })
  .meta({
    id: "ApiKey",
    description: "An API key's record; never the key itself",
    example: {
      id: "key_b7qVFd9pTcWqyVY5sgCCOk",
      name: "deploy bot",
      role: "agent",
      walletIds: ["wal_4bG7hQ2nR8sT1vX3yZ5aC9"],
      expiresAt: null,
      createdAt: "2026-01-01T00:00:00.000Z",
      lastUsed: null,
    },
  });

/** A short human name: trimmed, non-empty, at most 100 characters. */
export const displayName = z.string().trim().min(1).max(100);

const usdOrNull = z
  .string()
  .nullable()
  .meta({ description: "USD as a decimal string; null = no bound", example: "50" });

export const policyView = z
  .object({
    walletId: z.string(),
    maxPerTx: usdOrNull,
    dailyLimit: usdOrNull,
    whitelist: z.array(z.string()),
    alertAbove: usdOrNull,
    approvalAbove: usdOrNull,
    requireSpendAuthorization: z.boolean(),
    status: z.enum(["active", "paused"]),
    updatedAt: timestamp,
  })
  .meta({
    id: "Policy",
    description: "A wallet's spending policy; USD amounts as decimal strings, null = no bound",
    example: {
      walletId: "wal_4bG7hQ2nR8sT1vX3yZ5aC9",
      maxPerTx: "10",
      dailyLimit: "50",
      whitelist: ["0x000000000000000000000000000000000000dEaD"],
      alertAbove: null,
      approvalAbove: null,
      requireSpendAuthorization: false,
      status: "active",
      updatedAt: "2026-01-01T00:00:00.000Z",
    },
  });

/** The policy fields a client may set, as one component; {@link policyInput} adds the whitelist check. */
const policyChange = policyInputSchema.meta({
  id: "PolicyChange",
  description:
    "Any subset of the policy's fields; left out = unchanged, null = no bound. Whitelist entries: EVM or Solana addresses, or hostnames (x402).",
  example: { maxPerTx: "10", dailyLimit: "50", whitelist: ["0x000000000000000000000000000000000000dEaD"] },
});

/**
 * A token amount on the wire: a decimal string, or a JSON number that reads back exactly as written (no
 * exponent, no digit a double cannot hold; the JSON parser marks the others, see exact-json.ts). Anything
 * else is refused rather than rounded.
 */
export const tokenAmount = z
  .union([z.string().max(80), z.number(), z.instanceof(InexactNumber)], {
    error: (issue) =>
      issue.input === undefined
        ? 'required: a decimal string such as "2.5"'
        : 'expected a decimal string such as "2.5"',
  })
  .transform((value, ctx) => {
    if (typeof value === "string") return value;
    const text = value instanceof InexactNumber ? value.source : String(value);
    if (
      typeof value !== "number" ||
      !Number.isFinite(value) ||
      /e/i.test(text) ||
      (Number.isInteger(value) && !Number.isSafeInteger(value))
    ) {
      ctx.addIssue({
        code: "custom",
        message: `the JSON number ${text.slice(0, 40)} is not exact; send this amount as a decimal string`,
      });
      return z.NEVER;
    }
    return text;
  })
  .meta({ type: "string", description: 'decimal amount in token units, e.g. "2.5"', example: "2.5" });

/**
 * The policy fields a client may set (at wallet creation and by PATCH), each whitelist entry checked to be
 * an address of a chain kind the deployment serves, or a hostname: a 400 names the entry.
 */
export function policyInput(chains: ChainRegistry) {
  const served = new Set(chains.list().map((chain) => chain.kind));
  return policyChange.superRefine((input, ctx) => {
    input.whitelist?.forEach((entry, index) => {
      const problem = whitelistEntryProblem(entry, served);
      if (problem) ctx.addIssue({ code: "custom", path: ["whitelist", index], message: problem });
    });
  });
}

/** An endpoint as the examples of every webhook endpoint schema show it. */
export const WEBHOOK_ENDPOINT_EXAMPLE = {
  id: "wh_5nR2kW8qT1vY4zB7dF0hJ3",
  url: "https://example.com/hooks/svc",
  events: ["transaction.confirmed", "spend.alert"],
  description: "ops alerts",
  createdAt: "2026-01-01T00:00:00.000Z",
};

export const webhookEndpointView = z
  .object({
    id: z.string(),
    url: z.string(),
    events: z
      .array(z.string())
      .nullable()
      .meta({ description: "the event types sent to this endpoint; null = every type" }),
    description: z.string().nullable(),
    createdAt: timestamp,
  })
  .meta({
    id: "WebhookEndpoint",
    description: "A URL the account's events are sent to (Standard Webhooks); never its signing secret",
    example: WEBHOOK_ENDPOINT_EXAMPLE,
  });

/** The path parameters of every route under `/v1/webhook-endpoints/:id`. */
export const webhookEndpointPathParams = z.object({ id: idParam("wh") });
