/**
 * The service's resources as the SDK sees them (spec section 2 and api.md). These are the SDK's own types;
 * it never imports the service's code. Amounts the service returns stay decimal strings.
 */

/**
 * An account, as `svc.auth.register` returns it (spec 2.1).
 * @example
 * const account: Account = await svc.auth.register({ email, password });
 */
export interface Account {
  userId: string;
  email: string;
  name: string | null;
  createdAt: string;
}

/**
 * The login result (spec 2.2): the access token acts as an admin credential.
 * @example
 * const { accessToken } = await svc.auth.login({ email, password });
 * const admin = new SvcWallet({ apiKey: accessToken });
 */
export interface LoginResult {
  accessToken: string;
  expiresIn: number;
  /**
   * Keep it and pass it to this client's next login to the same email: that login is then counted for
   * this device, not for the email, so others guessing the email's password cannot keep this client out
   * (valid 30 days, renewed by each login). Not a credential.
   */
  deviceToken: string;
}

/**
 * What a credential is (`GET /v1/me`): the account, the role, and the API key's record (null for the login
 * access token). Never the key's value.
 * @example
 * const me: CurrentCredential = await svc.auth.me();
 * if (me.role === "read") console.log("this key can only look");
 */
export interface CurrentCredential {
  userId: string;
  /** The account's email, for an admin credential only (an agent or read key is not told its owner's). */
  email?: string;
  role: ApiKeyRole;
  apiKey: ApiKey | null;
}

/**
 * What an API key may do (api.md "Credentials and roles").
 * @example
 * const role: ApiKeyRole = "agent";
 */
export type ApiKeyRole = "admin" | "agent" | "read";

/**
 * An API key record (spec 2.6 and api.md); listing never shows the key value.
 * @example
 * for (const key of await svc.apiKeys.list()) console.log(key.name, key.role, key.lastUsed);
 */
export interface ApiKey {
  id: string;
  name: string;
  /** Present once the service has key roles. */
  role?: ApiKeyRole;
  /** The wallets the key may see and act on; null = every wallet of the account. */
  walletIds?: string[] | null;
  /** When the key stops working; null = never. */
  expiresAt?: string | null;
  createdAt: string;
  lastUsed: string | null;
}

/**
 * The creation response of an API key: the only time the full `key` is shown.
 * @example
 * const { key } = await admin.apiKeys.create({ name: "agent", role: "agent", walletIds: [wallet.id] });
 */
export interface CreatedApiKey extends ApiKey {
  key: string;
}

/**
 * Input of `svc.apiKeys.create`.
 * @example
 * const input: CreateApiKeyInput = { name: "reader", role: "read" };
 */
export interface CreateApiKeyInput {
  name: string;
  /** Default `agent` (decided by the service). */
  role?: ApiKeyRole;
  /** Bound the key to these wallets; omitted = every wallet of the account. */
  walletIds?: string[];
  /** ISO 8601 time after which the key answers 401 `key_expired`. */
  expiresAt?: string;
}

/**
 * A token a chain serves (`GET /v1/chains`).
 * @example
 * const usdc = chains.find((c) => c.name === "base")?.tokens.find((t) => t.symbol === "USDC");
 */
export interface ChainToken {
  symbol: string;
  /** ERC-20 contract (EVM) or SPL mint (Solana). */
  address: string;
  decimals: number;
  /** USD per whole token, a decimal string; absent when unknown. */
  usdPrice?: string;
  eip712?: { name: string; version: string };
}

/**
 * A chain the deployment serves, with its CAIP-2 network id and tokens (`GET /v1/chains`).
 * @example
 * const base = (await svc.chains.list()).find((chain) => chain.name === "base");
 */
export interface Chain {
  name: string;
  kind: "evm" | "solana";
  /** CAIP-2 network id, e.g. `eip155:8453`. */
  network: string;
  nativeToken: { symbol: string; decimals: number; usdPrice?: string };
  tokens: ChainToken[];
  testnet: boolean;
}

/**
 * A wallet's record (spec 2.3 and api.md).
 * @example
 * const record: WalletRecord = await svc.wallet.get(id);
 */
export interface WalletRecord {
  id: string;
  name: string;
  chains: string[];
  evm?: { address: string };
  solana?: { address: string };
  metadata: Record<string, unknown>;
  status: "active" | "archived";
  createdAt: string;
}

/**
 * Policy fields a client may set (USD as decimal strings or numbers; `null` removes a bound).
 * @example
 * await wallet.policy.update({ maxPerTx: "10", dailyLimit: "50" });
 */
export interface PolicyInput {
  maxPerTx?: string | number | null;
  dailyLimit?: string | number | null;
  alertAbove?: string | number | null;
  approvalAbove?: string | number | null;
  whitelist?: string[];
  requireSpendAuthorization?: boolean;
}

/**
 * A wallet's spending policy (api.md "Spending policy"); USD decimal strings, `null` = no bound.
 * @example
 * const policy: Policy = await wallet.policy.get();
 */
export interface Policy {
  walletId: string;
  maxPerTx: string | null;
  dailyLimit: string | null;
  whitelist: string[];
  alertAbove: string | null;
  /** A spend above this USD value waits for an admin's approval (`pending_approval`); null = never. */
  approvalAbove: string | null;
  requireSpendAuthorization?: boolean;
  status: "active" | "paused";
  updatedAt: string;
}

/**
 * Input of `svc.wallet.create`.
 * @example
 * const input: CreateWalletInput = { name: "research agent", chains: ["base"], policy: { maxPerTx: "10" } };
 */
export interface CreateWalletInput {
  name: string;
  /** Chain names this deployment serves (see `svc.chains.list()`). */
  chains: string[];
  metadata?: Record<string, unknown>;
  policy?: PolicyInput;
}

/**
 * Where a transaction stands: a spend above the policy's `approvalAbove` starts `pending_approval` and goes
 * to `pending` when approved or ends `rejected` (rejected or expired); a broadcast one goes from `pending`
 * to `confirmed` or `failed`.
 * @example
 * const final: TransactionStatus[] = ["confirmed", "failed", "rejected"];
 */
export type TransactionStatus = "pending_approval" | "pending" | "confirmed" | "failed" | "rejected";

/**
 * Where an approval stands (`GET /v1/approvals?status=`).
 * @example
 * const held = await svc.approvals.list({ status: "pending" satisfies ApprovalStatus });
 */
export type ApprovalStatus = "pending" | "approved" | "rejected" | "expired";

/**
 * The owner's decision on a spend above `approvalAbove`, as a transaction carries it.
 * @example
 * if (tx.approval?.status === "pending") console.log("waiting for an admin until", tx.approval.expiresAt);
 */
export interface TransactionApproval {
  status: ApprovalStatus;
  /** When it ends `rejected` (`failureReason: "approval_expired"`) if nobody decides. */
  expiresAt: string;
  decidedAt?: string;
}

/**
 * A transaction (spec 2.4 and api.md). `amount` is a decimal string in token units.
 * @example
 * const tx: Transaction = await svc.transactions.get("tx_…");
 */
export interface Transaction {
  id: string;
  walletId: string;
  type: "send" | "receive" | "x402";
  amount: string;
  token: string;
  chain: string;
  to: string;
  from: string;
  txHash?: string;
  timestamp: string;
  status: TransactionStatus;
  confirmedAt?: string;
  failureReason?: string;
  spendDecisionId?: string;
  /** x402: the URL of the resource paid for. */
  resource?: string;
  /** Present on a spend that was held for approval (above the policy's `approvalAbove`). */
  approval?: TransactionApproval;
  /**
   * A spend that landed on chain (confirmed, or failed there): what it cost the wallet in the chain's native
   * coin (`token`) beyond its amount, as the chain tells it; the network fee and, on Solana, the rent of a
   * token account it opened for its recipient.
   */
  fee?: { amount: string; token: string };
}

/**
 * A held spend as `svc.approvals.list` gives it: the transaction, with its approval deadline as `expiresAt`.
 * Its id is the transaction's id.
 * @example
 * for (const held of await admin.approvals.list()) console.log(held.id, held.amount, held.to, held.expiresAt);
 */
export type Approval = Transaction & { expiresAt: string };

/**
 * Query of `svc.approvals.list`.
 * @example
 * await admin.approvals.list({ status: "expired", limit: 20 });
 */
export interface ApprovalQuery {
  /** Default `pending` (oldest first). */
  status?: ApprovalStatus;
  limit?: number;
}

/**
 * Options of `wallet.waitForTransaction`.
 * @example
 * await wallet.waitForTransaction(tx.id, { until: "confirmed", timeoutMs: 120_000 });
 */
export interface WaitForTransactionOptions {
  /**
   * The status (or statuses) to wait for. Default: any status but `pending_approval` and `pending`. Waiting
   * also ends at a final status (`confirmed`, `failed`, `rejected`), which cannot change any more.
   */
  until?: TransactionStatus | TransactionStatus[];
  /** Give up after this long (throws {@link SvcWaitTimeoutError}); default 60000. */
  timeoutMs?: number;
  /** Pause between reads; default 1000. */
  intervalMs?: number;
  /** Aborts the wait. */
  signal?: AbortSignal;
}

/**
 * One page of a wallet's history (spec 2.5).
 * @example
 * const page: TransactionPage = await wallet.transactions({ limit: 50 });
 */
export interface TransactionPage {
  data: Transaction[];
  total: number;
  limit: number;
  offset: number;
}

/**
 * Query of a wallet's history (spec 4.3).
 * @example
 * const query: TransactionQuery = { type: "send", chain: "base", limit: 100 };
 */
export interface TransactionQuery {
  /** Page size, default 20, at most 100. */
  limit?: number;
  offset?: number;
  chain?: string;
  type?: "send" | "receive" | "x402";
}

/**
 * A wallet's balances read from its chains.
 * @example
 * const { balances, totalUsdValue } = await wallet.balance();
 */
export interface Balance {
  walletId: string;
  balances: { chain: string; token: string; amount: string; usdValue: string | null }[];
  totalUsdValue: string;
  updatedAt: string;
}

/**
 * A wallet's rolling 24 h as its daily limit counts it (sends and x402 payments waiting for approval,
 * pending or confirmed), in total and by hour; USD decimal strings.
 * @example
 * const { used, dailyLimit, hours } = await wallet.spending();
 */
export interface WalletSpending {
  walletId: string;
  /** The policy's daily limit; null = none. */
  dailyLimit: string | null;
  /** What the window holds: the figure the daily limit is checked against. */
  used: string;
  /** Room left under the limit; null without one. */
  remaining: string | null;
  windowStart: string;
  /** When the oldest spend leaves the window. */
  resetsAt: string;
  /**
   * The window's 24 hours, oldest first; a spend counts in the hour it was made (one made while the window
   * was read, in the last).
   */
  hours: { start: string; usd: string }[];
}

/**
 * Input of `wallet.send` (spec 4.7).
 * @example
 * await wallet.send({ to: "0xc202…", amount: 10, token: "USDC", chain: "base" });
 */
export interface SendInput {
  /** Recipient address on `chain`. */
  to: string;
  /** Token units: a number (converted by its shortest round-trip decimal form) or a decimal string. */
  amount: number | string;
  /** Token symbol; default `USDC`. */
  token?: string;
  /** Chain name, e.g. `base` or `solana`. */
  chain: string;
  /**
   * A decision id the caller obtained from the daemon itself: the client skips its own authorize call,
   * forwards this id, and does not settle it (whoever authorized it settles it).
   */
  spendDecisionId?: string;
}

/**
 * Per-call options of requests that move money.
 * @example
 * await wallet.send(input, { idempotencyKey: `invoice-${invoice.id}`, signal: AbortSignal.timeout(10_000) });
 */
export interface RequestOptions {
  /** The `Idempotency-Key` of this call (1–255 characters); generated once per call when omitted. */
  idempotencyKey?: string;
  /** Aborts the call (and its retries). */
  signal?: AbortSignal;
}

/**
 * Input of `wallet.faucet` (local and test networks only).
 * @example
 * await wallet.faucet({ chain: "base", token: "USDC", amount: "250" });
 */
export interface FaucetInput {
  chain: string;
  token: string;
  amount?: number | string;
}

/**
 * The settlement receipt a paid resource sent (`PAYMENT-RESPONSE` in x402 v2, `X-PAYMENT-RESPONSE` in v1).
 * @example
 * const receipt: PaymentReceipt = { success: true, txHash: "0x5c50…2060", network: "eip155:8453", payer: "0x8ba1…BA72" };
 */
export interface PaymentReceipt {
  success?: boolean;
  /** The settlement's transaction hash (EVM) or signature (Solana). */
  txHash?: string;
  network?: string;
  payer?: string;
  errorReason?: string;
}

/**
 * The answer of `POST /v1/x402/fetch` (api.md "x402"): the resource's response and the payment made for it.
 * `wallet.fetch` turns it into a standard `Response`.
 * @example
 * const result: PaidFetchResult = { status: 200, headers: { "content-type": "application/json" }, body: { forecast: "sunny" }, amountCharged: "0.01", transactionId: "tx_…" };
 */
export interface PaidFetchResult {
  status: number;
  headers: Record<string, string>;
  /** Parsed JSON when the resource answered JSON, else text; binary as base64 (`bodyEncoding`). */
  body: unknown;
  bodyEncoding?: "base64";
  paymentReceipt?: PaymentReceipt;
  /** Whole tokens paid, e.g. `"0.01"`. */
  amountCharged?: string;
  transactionId?: string;
  transaction?: Transaction;
  spendDecisionId?: string;
}

/**
 * The request `wallet.fetch` makes, and how much it may pay. The body is text (or a JSON value, sent as
 * JSON): the service makes the request, so streams and forms cannot be relayed.
 * @example
 * await wallet.fetch(url, { method: "POST", body: { city: "Lisbon" }, chain: "base", maxAmount: "0.05" });
 */
export interface X402FetchInit {
  method?: "GET" | "POST" | "PUT" | "PATCH" | "DELETE" | "HEAD";
  headers?: Record<string, string> | Headers | [string, string][];
  body?: string | Record<string, unknown> | unknown[];
  /** Pay only on this chain of the wallet (a chain name, e.g. `base`). */
  chain?: string;
  /** Pay at most this much, in whole tokens (e.g. `"0.05"`): a dearer challenge is refused, nothing signed. */
  maxAmount?: string;
  /** The `Idempotency-Key` of the payment (1–255 characters); generated once per call when omitted. */
  idempotencyKey?: string;
  /** Aborts the call. */
  signal?: AbortSignal;
}

/**
 * A payable resource listed by the facilitator's discovery (`GET /v1/x402/services`).
 * @example
 * const [service] = await svc.x402.discover({ query: "weather" }); await wallet.fetch(service.resource);
 */
export interface X402Service {
  /** The URL to fetch. */
  resource: string;
  type: string;
  x402Version: number;
  description?: string;
  mimeType?: string;
  serviceName?: string;
  tags?: string[];
  lastUpdated?: string;
  /** The payment requirements, verbatim. */
  accepts: Record<string, unknown>[];
}

/**
 * Query of `svc.x402.discover`.
 * @example
 * await svc.x402.discover({ category: "weather", limit: 10 });
 */
export interface X402DiscoverQuery {
  /** A tag the service carries. */
  category?: string;
  /** Text in its URL, name, description or tags. */
  query?: string;
  limit?: number;
}

/**
 * The kinds of event the service writes (api.md "Events and webhooks").
 * @example
 * const type: EventType = "transaction.confirmed";
 */
export type EventType =
  | "transaction.created"
  | "transaction.confirmed"
  | "transaction.failed"
  | "transaction.received"
  | "spend.alert"
  | "approval.requested"
  | "approval.approved"
  | "approval.rejected"
  | "approval.expired"
  | "policy.updated"
  | "wallet.archived"
  | "wallet.restored"
  | "api_key.created"
  | "api_key.revoked";

/**
 * What a `spend.alert` event carries: a spend above the policy's `alertAbove` (the spend proceeds).
 * @example
 * if (event.type === "spend.alert") console.log(event.data.usdValue, ">", event.data.alertAbove);
 */
export interface SpendAlert {
  alertAbove: string;
  usdValue: string;
  transaction: Transaction;
}

/**
 * The resource each event type carries as `data`, as it stood when the change committed.
 * @example
 * const tx: EventData["approval.requested"] = event.data;
 */
export interface EventData {
  "transaction.created": Transaction;
  "transaction.confirmed": Transaction;
  "transaction.failed": Transaction;
  "transaction.received": Transaction;
  "spend.alert": SpendAlert;
  "approval.requested": Transaction;
  "approval.approved": Transaction;
  "approval.rejected": Transaction;
  "approval.expired": Transaction;
  "policy.updated": Policy;
  "wallet.archived": WalletRecord;
  "wallet.restored": WalletRecord;
  "api_key.created": ApiKey;
  "api_key.revoked": ApiKey;
}

/**
 * An event (`GET /v1/events`); narrowing on `type` types `data`. Its `id` is a webhook delivery's `webhook-id`.
 * @example
 * for await (const event of svc.events.iterate({ type: "transaction.confirmed" })) console.log(event.data.txHash);
 */
export type SvcEvent = {
  [T in EventType]: { id: string; type: T; createdAt: string; data: EventData[T] };
}[EventType];

/**
 * One page of events, oldest first; `nextCursor` is always present (read on, or poll, from it).
 * @example
 * const { data, nextCursor } = await svc.events.list({ after: savedCursor });
 */
export interface EventPage {
  data: SvcEvent[];
  nextCursor: string;
}

/**
 * Query of `svc.events.list`.
 * @example
 * await svc.events.list({ type: ["approval.requested", "spend.alert"], walletId: "wal_…", limit: 100 });
 */
export interface EventQuery {
  /** A `nextCursor` from an earlier page; omitted = from the first event. */
  after?: string;
  /** Only these types. */
  type?: EventType | EventType[];
  /** Only events about this wallet. */
  walletId?: string;
  /** Page size (the service's default 50, at most 100). */
  limit?: number;
}

/**
 * Options of `svc.events.iterate`: the query, and whether to keep polling once the events run out.
 * @example
 * const stop = new AbortController();
 * for await (const event of svc.events.iterate({ follow: true, intervalMs: 2000, signal: stop.signal })) handle(event);
 */
export interface EventIterateOptions extends EventQuery {
  /** Keep polling from the last cursor once the events run out (until `signal` aborts); default false. */
  follow?: boolean;
  /** With `follow`: the pause after an empty page; default 2000. */
  intervalMs?: number;
  /** Ends the iteration (without an error). */
  signal?: AbortSignal;
}

/**
 * A webhook endpoint (`/v1/webhook-endpoints`); the signing secret is only in the creation response.
 * @example
 * for (const endpoint of await admin.webhooks.list()) console.log(endpoint.url, endpoint.events ?? "all");
 */
export interface WebhookEndpoint {
  id: string;
  url: string;
  /** The event types delivered; null = every type. */
  events: EventType[] | null;
  description: string | null;
  createdAt: string;
}

/**
 * An endpoint given a new signing secret (`svc.webhooks.rotateSecret`): the only time the new `secret` is
 * shown. Deliveries carry the replaced secret's signature too until `previousSecretExpiresAt` (null: no more).
 * @example
 * const { secret, previousSecretExpiresAt } = await admin.webhooks.rotateSecret("wh_…");
 */
export interface RotatedWebhookEndpoint extends WebhookEndpoint {
  secret: string;
  previousSecretExpiresAt: string | null;
}

/**
 * The creation response of a webhook endpoint: the only time its `secret` (`whsec_…`) is shown.
 * @example
 * const { id, secret } = await admin.webhooks.create({ url: "https://example.com/hooks/svc" });
 */
export interface CreatedWebhookEndpoint extends WebhookEndpoint {
  secret: string;
}

/**
 * Input of `svc.webhooks.create`.
 * @example
 * const input: CreateWebhookEndpointInput = { url: "https://example.com/hooks/svc", events: ["approval.requested"] };
 */
export interface CreateWebhookEndpointInput {
  url: string;
  /** Only these types; omitted = every type. */
  events?: EventType[];
  description?: string;
}

/**
 * One delivery attempt of an event to an endpoint (`GET /v1/webhook-endpoints/:id/deliveries`).
 * @example
 * const failed = (await admin.webhooks.deliveries(endpoint.id)).filter((d) => d.status !== "succeeded");
 */
export interface WebhookDelivery {
  eventId: string;
  /** 1 for the first attempt at this event on this endpoint, redeliveries counted. */
  attempt: number;
  /** `failed`: another attempt follows (or a redelivery failed); `gave_up`: failed for 3 days, skipped. */
  status: "succeeded" | "failed" | "gave_up";
  /** Sent because of `svc.webhooks.redeliver`. */
  redelivery: boolean;
  /** The receiver's HTTP status; null when it gave none (refused, unreachable, timeout). */
  responseStatus: number | null;
  /** Why it failed: the status and the start of the answer, or what went wrong. */
  error?: string;
  at: string;
}

/**
 * Query of `svc.webhooks.deliveries`.
 * @example
 * await admin.webhooks.deliveries(endpoint.id, { eventId: "evt_…" });
 */
export interface WebhookDeliveryQuery {
  /** Only the attempts at this event. */
  eventId?: string;
  /** Default 50, at most 100. */
  limit?: number;
}

/**
 * A verified webhook body (`verifyWebhook`): the event's type, when it was sent, and its data.
 * @example
 * const event: WebhookEvent = verifyWebhook(body, request.headers, secret);
 */
export type WebhookEvent = {
  [T in EventType]: { type: T; timestamp: string; data: EventData[T] };
}[EventType];
