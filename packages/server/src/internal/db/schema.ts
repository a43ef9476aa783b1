import { sql } from "drizzle-orm";
import {
  bigint,
  bigserial,
  boolean,
  customType,
  integer,
  json,
  jsonb,
  numeric,
  pgTable,
  primaryKey,
  text,
  timestamp,
} from "drizzle-orm/pg-core";

const bytea = customType<{ data: Buffer; driverData: Buffer | Uint8Array }>({
  dataType: () => "bytea",
  fromDriver: (value) => Buffer.from(value),
});

const createdAt = () => timestamp("created_at", { withTimezone: true, mode: "date" }).notNull().defaultNow();

/** Table definitions matching `migrations/*.sql`; the SQL files are the source of truth. */
export const serviceKeys = pgTable("service_keys", {
  name: text("name").primaryKey(),
  canary: bytea("canary").notNull(),
  createdAt: createdAt(),
});

export const accounts = pgTable("accounts", {
  id: text("id").primaryKey(),
  email: text("email").notNull(),
  name: text("name"),
  passwordHash: text("password_hash").notNull(),
  createdAt: createdAt(),
});

export const endedAccessTokens = pgTable("ended_access_tokens", {
  jti: text("jti").primaryKey(),
  expiresAt: timestamp("expires_at", { withTimezone: true, mode: "date" }).notNull(),
});

export const apiKeys = pgTable("api_keys", {
  id: text("id").primaryKey(),
  accountId: text("account_id").notNull(),
  name: text("name").notNull(),
  keyHash: text("key_hash").notNull(),
  createdAt: createdAt(),
  lastUsedAt: timestamp("last_used_at", { withTimezone: true, mode: "date" }),
  revokedAt: timestamp("revoked_at", { withTimezone: true, mode: "date" }),
  role: text("role", { enum: ["admin", "agent", "read"] }).notNull(),
  /** The wallets the key may see and act on; null = every wallet of the account. */
  walletIds: jsonb("wallet_ids").$type<string[]>(),
  expiresAt: timestamp("expires_at", { withTimezone: true, mode: "date" }),
});

export const wallets = pgTable("wallets", {
  id: text("id").primaryKey(),
  accountId: text("account_id").notNull(),
  name: text("name").notNull(),
  chains: jsonb("chains").$type<string[]>().notNull(),
  metadata: jsonb("metadata").$type<Record<string, unknown>>().notNull(),
  evmAddress: text("evm_address"),
  solanaAddress: text("solana_address"),
  status: text("status", { enum: ["active", "archived"] }).notNull(),
  wrappedDataKey: bytea("wrapped_data_key").notNull(),
  createdAt: createdAt(),
  archivedAt: timestamp("archived_at", { withTimezone: true, mode: "date" }),
});

export const walletKeys = pgTable(
  "wallet_keys",
  {
    walletId: text("wallet_id").notNull(),
    chainKind: text("chain_kind", { enum: ["evm", "solana"] }).notNull(),
    encryptedPrivateKey: bytea("encrypted_private_key").notNull(),
  },
  (t) => [primaryKey({ columns: [t.walletId, t.chainKind] })],
);

export const walletPolicies = pgTable("wallet_policies", {
  walletId: text("wallet_id").primaryKey(),
  maxPerTxMicros: numeric("max_per_tx_micros", { mode: "bigint" }),
  dailyLimitMicros: numeric("daily_limit_micros", { mode: "bigint" }),
  alertAboveMicros: numeric("alert_above_micros", { mode: "bigint" }),
  approvalAboveMicros: numeric("approval_above_micros", { mode: "bigint" }),
  whitelist: jsonb("whitelist").$type<string[]>().notNull(),
  status: text("status", { enum: ["active", "paused"] }).notNull(),
  requireSpendAuthorization: boolean("require_spend_authorization").notNull(),
  updatedAt: timestamp("updated_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
});

export const transactions = pgTable("transactions", {
  id: text("id").primaryKey(),
  walletId: text("wallet_id").notNull(),
  type: text("type", { enum: ["send", "receive", "x402"] }).notNull(),
  chain: text("chain").notNull(),
  token: text("token").notNull(),
  amountAtomic: numeric("amount_atomic", { mode: "bigint" }).notNull(),
  decimals: integer("decimals").notNull(),
  fromAddress: text("from_address").notNull(),
  toAddress: text("to_address").notNull(),
  txHash: text("tx_hash"),
  status: text("status", {
    enum: ["pending_approval", "pending", "confirmed", "failed", "rejected"],
  }).notNull(),
  failureReason: text("failure_reason"),
  spendDecisionId: text("spend_decision_id"),
  /** The API key that asked for the spend; null when the owner's login did (and for rows from before). */
  requestedByKeyId: text("requested_by_key_id"),
  createdAt: createdAt(),
  confirmedAt: timestamp("confirmed_at", { withTimezone: true, mode: "date" }),
  usdMicros: numeric("usd_micros", { mode: "bigint" }),
  rawTx: text("raw_tx"),
  nonce: integer("nonce"),
  lastValidBlockHeight: numeric("last_valid_block_height", { mode: "bigint" }),
  /**
   * When the signed transfer was last handed to the chain: set by the write that records it signed (its
   * broadcast follows at once), and again by each re-broadcast. A re-broadcast waits a while after it.
   */
  broadcastAt: timestamp("broadcast_at", { withTimezone: true, mode: "date" }),
  /** Which transfer of its transaction a receive records; NULL for spends. */
  transferIndex: integer("transfer_index"),
  /** x402: the URL of the resource paid for; NULL for other types. */
  resource: text("resource"),
  /** x402: what identifies the signed payment on chain (see `src/x402/pay.ts`); NULL for other types. */
  x402Payment: jsonb("x402_payment").$type<Record<string, unknown>>(),
  /** x402: the signed payment's identity (`paymentKeyOf`), unique: one record per payment; NULL for the rest. */
  x402PaymentKey: text("x402_payment_key"),
  /** Spends held for an owner's approval: pending → approved | rejected | expired; NULL for the others. */
  approvalStatus: text("approval_status", { enum: ["pending", "approved", "rejected", "expired"] }),
  approvalExpiresAt: timestamp("approval_expires_at", { withTimezone: true, mode: "date" }),
  approvalDecidedAt: timestamp("approval_decided_at", { withTimezone: true, mode: "date" }),
  /**
   * A spend that landed on chain: what it cost its wallet in the chain's native coin (`feeToken`, with
   * `feeDecimals`) beyond its amount, as the chain tells it (migration 0019); NULL for the others.
   */
  feeAtomic: numeric("fee_atomic", { mode: "bigint" }),
  feeToken: text("fee_token"),
  feeDecimals: integer("fee_decimals"),
  /**
   * Where the spend stands in the order its wallet's spends were admitted (handed out under the wallet's
   * spend lock: `lockSpendingPolicy`; migration 0021); NULL for receives, held spends not approved, and the
   * transfers filling an EVM nonce gap.
   */
  admissionSeq: bigint("admission_seq", { mode: "bigint" }),
});

export const historyCounts = pgTable(
  "history_counts",
  {
    walletId: text("wallet_id").notNull(),
    chain: text("chain").notNull(),
    type: text("type").notNull(),
    count: bigint("count", { mode: "number" }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.walletId, t.chain, t.type] })],
);

export const evmNonces = pgTable(
  "evm_nonces",
  {
    chain: text("chain").notNull(),
    address: text("address").notNull(),
    nextNonce: integer("next_nonce").notNull(),
  },
  (t) => [primaryKey({ columns: [t.chain, t.address] })],
);

export const idempotencyKeys = pgTable(
  "idempotency_keys",
  {
    accountId: text("account_id").notNull(),
    key: text("key").notNull(),
    requestHash: text("request_hash").notNull(),
    state: text("state", { enum: ["in_progress", "completed"] }).notNull(),
    transactionId: text("transaction_id"),
    responseStatus: integer("response_status"),
    responseBody: jsonb("response_body"),
    lockedAt: timestamp("locked_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
    createdAt: createdAt(),
  },
  (t) => [primaryKey({ columns: [t.accountId, t.key] })],
);

export const chainCursors = pgTable(
  "chain_cursors",
  {
    chain: text("chain").notNull(),
    network: text("network").notNull(),
    cursor: text("cursor").notNull(),
    updatedAt: timestamp("updated_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.chain, t.network] })],
);

export const faucetGrants = pgTable("faucet_grants", {
  id: text("id").primaryKey(),
  walletId: text("wallet_id").notNull(),
  chain: text("chain").notNull(),
  token: text("token").notNull(),
  amountAtomic: numeric("amount_atomic", { mode: "bigint" }).notNull(),
  txHash: text("tx_hash"),
  createdAt: createdAt(),
});

export const spendHours = pgTable(
  "spend_hours",
  {
    walletId: text("wallet_id").notNull(),
    hour: timestamp("hour", { withTimezone: true, mode: "date" }).notNull(),
    usdMicros: numeric("usd_micros", { mode: "bigint" }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.walletId, t.hour] })],
);

export const events = pgTable("events", {
  seq: bigserial("seq", { mode: "bigint" }).primaryKey(),
  id: text("id").notNull(),
  /** The id of the database transaction that wrote the event (set by the database). */
  txId: bigint("tx_id", { mode: "bigint" }).notNull().default(sql`pg_current_xact_id()::text::bigint`),
  accountId: text("account_id").notNull(),
  walletId: text("wallet_id"),
  type: text("type").notNull(),
  data: json("data").$type<Record<string, unknown>>().notNull(),
  createdAt: createdAt(),
});

export const webhookEndpoints = pgTable("webhook_endpoints", {
  id: text("id").primaryKey(),
  accountId: text("account_id").notNull(),
  url: text("url").notNull(),
  /** The event types sent; null = every type. */
  eventTypes: text("event_types").array(),
  description: text("description"),
  /** The signing secret sealed under the master key; never stored in clear. */
  sealedSecret: bytea("sealed_secret").notNull(),
  /** The secret a rotation replaced, sealed alike: deliveries carry its signature too until it expires. */
  sealedPreviousSecret: bytea("sealed_previous_secret"),
  previousSecretExpiresAt: timestamp("previous_secret_expires_at", { withTimezone: true, mode: "date" }),
  createdAt: createdAt(),
  deletedAt: timestamp("deleted_at", { withTimezone: true, mode: "date" }),
  cursorTxId: bigint("cursor_tx_id", { mode: "bigint" }).notNull(),
  cursorSeq: bigint("cursor_seq", { mode: "bigint" }).notNull(),
  /** The snapshot the endpoint was created in: events it sees committed before, and are not sent. */
  startSnapshot: text("start_snapshot").notNull(),
  attempts: integer("attempts").notNull(),
  /** The event `attempts` and `firstAttemptAt` are about; another event after the cursor starts afresh. */
  attemptsEventId: text("attempts_event_id"),
  firstAttemptAt: timestamp("first_attempt_at", { withTimezone: true, mode: "date" }),
  nextAttemptAt: timestamp("next_attempt_at", { withTimezone: true, mode: "date" }),
  leaseOwner: text("lease_owner"),
  leasedUntil: timestamp("leased_until", { withTimezone: true, mode: "date" }),
});

export const webhookDeliveries = pgTable("webhook_deliveries", {
  id: bigserial("id", { mode: "bigint" }).primaryKey(),
  endpointId: text("endpoint_id").notNull(),
  eventId: text("event_id").notNull(),
  attempt: integer("attempt").notNull(),
  status: text("status", { enum: ["succeeded", "failed", "gave_up"] }).notNull(),
  redelivery: boolean("redelivery").notNull(),
  responseStatus: integer("response_status"),
  error: text("error"),
  at: timestamp("at", { withTimezone: true, mode: "date" }).notNull(),
});

export const webhookRedeliveries = pgTable("webhook_redeliveries", {
  id: bigserial("id", { mode: "bigint" }).primaryKey(),
  endpointId: text("endpoint_id").notNull(),
  eventId: text("event_id").notNull(),
  requestedAt: timestamp("requested_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
});
