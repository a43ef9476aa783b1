import { SpendGate } from "./authz/gate.ts";
import type { SpendAuthzConfig } from "./authz/types.ts";
import { SvcConnectionError, SvcValidationError } from "./errors.ts";
import { NetworkDirectory } from "./network.ts";
import { type FetchLike, isServiceUrl, pathSegment, sleep, Transport } from "./transport.ts";
import type {
  Account,
  ApiKey,
  Approval,
  ApprovalQuery,
  Chain,
  CreateApiKeyInput,
  CreatedApiKey,
  CreatedWebhookEndpoint,
  CreateWalletInput,
  CreateWebhookEndpointInput,
  CurrentCredential,
  EventIterateOptions,
  EventPage,
  EventQuery,
  LoginResult,
  RequestOptions,
  RotatedWebhookEndpoint,
  SvcEvent,
  Transaction,
  WalletRecord,
  WebhookDelivery,
  WebhookDeliveryQuery,
  WebhookEndpoint,
  X402DiscoverQuery,
  X402Service,
} from "./types.ts";
import { type ClientContext, policyBody, Wallet } from "./wallet.ts";

/**
 * The local service's address, the default `baseUrl`.
 * @example
 * new SvcWallet({ apiKey }); // talks to DEFAULT_BASE_URL, http://127.0.0.1:8080/v1
 */
export const DEFAULT_BASE_URL = "http://127.0.0.1:8080/v1";
const DEFAULT_MAX_RETRIES = 2;
const DEFAULT_TIMEOUT_MS = 60_000;
const OPTION_KEYS = new Set([
  "apiKey",
  "baseUrl",
  "authz",
  "fetch",
  "maxRetries",
  "retryRateLimited",
  "timeoutMs",
]);

/**
 * Options of {@link SvcWallet}.
 * @example
 * const options: SvcWalletOptions = { apiKey: process.env.SVC_API_KEY!, baseUrl: "http://127.0.0.1:8080/v1" };
 */
export interface SvcWalletOptions {
  /** An API key (`svc_…`) or a login access token. Needed by every call but `auth.register` / `auth.login`. */
  apiKey?: string;
  /** The service's base URL, ending in `/v1`; default `http://127.0.0.1:8080/v1`. */
  baseUrl?: string;
  /** Turns on the spend-authorization gate (spec 2.11); without it `svc.authz` does not exist. */
  authz?: SpendAuthzConfig;
  /** `fetch` to use for the service and the daemon; default the global `fetch`. */
  fetch?: FetchLike;
  /** Retries after the first attempt on network errors, 429 and 5xx; default 2. */
  maxRetries?: number;
  /**
   * Whether a 429 is retried once its `Retry-After` (up to 60 s) has passed; default true. false raises
   * {@link SvcRateLimitError} at once (for a caller that must not wait), and keeps the other retries.
   */
  retryRateLimited?: boolean;
  /** Per-attempt timeout in milliseconds; default 60000. */
  timeoutMs?: number;
}

function badOption(message: string): SvcValidationError {
  return new SvcValidationError({ code: "ValidationError", status: 0, message, reason: "invalid_option" });
}

function strip<T extends object>(input: T): Partial<T> {
  return Object.fromEntries(Object.entries(input).filter(([, value]) => value !== undefined)) as Partial<T>;
}

/**
 * The events of `svc.events.iterate`: an async iterable that also tells how far it has read.
 * @example
 * const events = svc.events.iterate({ after: saved });
 * for await (const event of events) handle(event);
 * saved = events.cursor ?? saved;
 */
export interface EventStream extends AsyncIterable<SvcEvent> {
  /**
   * The `nextCursor` after the last page handed over in full (before that, the query's `after`). Iterating
   * the same stream again reads on from here.
   */
  readonly cursor: string | undefined;
}

const DEFAULT_EVENT_POLL_MS = 2_000;

/** A query's `type` as the service takes it: one type, or several separated by commas. */
function typeParam(type: EventQuery["type"]): string | undefined {
  if (type === undefined) return undefined;
  const types = Array.isArray(type) ? type : [type];
  if (types.length === 0 || types.some((t: string) => typeof t !== "string" || t === "" || t.includes(","))) {
    throw badOption("events: `type` must be an event type or a non-empty array of them");
  }
  return types.join(",");
}

/**
 * The Svc client: the whole REST API, and the optional spend-authorization gate.
 * @example
 * import { SvcWallet } from "@svc/sdk";
 *
 * const svc = new SvcWallet({ apiKey: process.env.SVC_API_KEY! });
 * const wallet = await svc.wallet.get("wal_…");
 * const tx = await wallet.send({ to: "0xc202…f741", amount: 10, token: "USDC", chain: "base" });
 */
export class SvcWallet {
  /** Accounts: register and log in (no credential needed). */
  readonly auth: {
    /**
     * Creates an account (password at least 12 characters).
     * @example
     * const account = await svc.auth.register({ email: "ada@example.com", password: "correct-horse-battery" });
     */
    register(input: { email: string; password: string; name?: string }): Promise<Account>;
    /**
     * Logs in; the access token acts as an admin credential for an hour. Pass the `deviceToken` of this
     * client's last login to the email: the service then counts this login for the device, not the email.
     * @example
     * const { accessToken, deviceToken } = await svc.auth.login({ email, password, deviceToken: saved });
     */
    login(input: { email: string; password: string; deviceToken?: string }): Promise<LoginResult>;
    /**
     * What this client's credential is: its account, its role and, for an API key, the key's record.
     * @example
     * const { role, apiKey } = await svc.auth.me(); // "agent", { walletIds: ["wal_…"], … }
     */
    me(): Promise<CurrentCredential>;
    /**
     * Ends this client's login access token before it expires (`POST /v1/auth/logout`): the service refuses
     * it from then on, a copy of it included. An API key is revoked instead (`apiKeys.revoke`).
     * @example
     * await owner.auth.logout();
     */
    logout(): Promise<void>;
  };
  /** API keys of the account (creating, listing and revoking others need an admin credential). */
  readonly apiKeys: {
    /**
     * Creates a key; the full `key` is in this response only.
     * @example
     * const { key } = await admin.apiKeys.create({ name: "agent", role: "agent", walletIds: [wallet.id] });
     */
    create(input: CreateApiKeyInput): Promise<CreatedApiKey>;
    /**
     * The account's active keys, without their values.
     * @example
     * const keys = await admin.apiKeys.list();
     */
    list(): Promise<ApiKey[]>;
    /**
     * Revokes a key, immediately and for good.
     * @example
     * await admin.apiKeys.revoke("key_…");
     */
    revoke(keyId: string): Promise<void>;
  };
  /** The chains and tokens the deployment serves. */
  readonly chains: {
    /**
     * `GET /v1/chains` (read fresh; spends use a cached copy).
     * @example
     * const chains = await svc.chains.list();
     */
    list(): Promise<Chain[]>;
  };
  /** Wallets of the account. */
  readonly wallet: {
    /**
     * Creates a wallet (admin credential), optionally with its policy.
     * @example
     * const wallet = await admin.wallet.create({ name: "research agent", chains: ["base"], policy: { maxPerTx: "10" } });
     */
    create(input: CreateWalletInput): Promise<Wallet>;
    /**
     * Every wallet the credential may see, newest first.
     * @example
     * const wallets = await svc.wallet.list();
     */
    list(): Promise<Wallet[]>;
    /**
     * One wallet by id (spec 4.7); {@link SvcNotFoundError} when absent.
     * @example
     * const wallet = await svc.wallet.get("wal_…");
     */
    get(walletId: string): Promise<Wallet>;
  };
  /** Transactions by id. */
  readonly transactions: {
    /**
     * One transaction by id. With the gate on, a spend of this client's that was held for approval and is
     * now broadcast is settled with the daemon (as `wallet.waitForTransaction` does).
     * @example
     * const tx = await svc.transactions.get("tx_…");
     */
    get(transactionId: string): Promise<Transaction>;
  };
  /**
   * The account's event log (api.md "Events and webhooks"), oldest first: a client without a public URL
   * polls it instead of receiving webhooks. Admin credentials see every event, other keys those of their
   * wallets.
   */
  readonly events: {
    /**
     * One page of events after a cursor. Keep `nextCursor` (always present) to read on or poll from it.
     * @example
     * const { data, nextCursor } = await svc.events.list({ type: "transaction.confirmed", limit: 100 });
     */
    list(query?: EventQuery): Promise<EventPage>;
    /**
     * Every event from `after` on, page after page. Without `follow` the iteration ends at the first empty
     * page (the events there are so far); with `follow: true` it keeps polling from the last cursor,
     * pausing `intervalMs` (default 2000) after an empty page, until `signal` aborts (which ends it without
     * an error) or the loop breaks. `cursor` is the position after the last page handed over in full:
     * save it to resume (events of a page left half-read come again).
     * @example
     * const events = svc.events.iterate({ after: saved, follow: true, signal: stop.signal });
     * for await (const event of events) if (event.type === "approval.requested") notify(event.data);
     * save(events.cursor);
     */
    iterate(options?: EventIterateOptions): EventStream;
  };
  /**
   * Spends above a policy's `approvalAbove`, waiting for an owner's decision. An approval's id is its
   * transaction's id. Deciding needs an admin credential (an agent key gets {@link SvcForbiddenError}).
   */
  readonly approvals: {
    /**
     * The held spends in one state (default `pending`, oldest first), each with its deadline `expiresAt`.
     * @example
     * const waiting = await admin.approvals.list();
     */
    list(query?: ApprovalQuery): Promise<Approval[]>;
    /**
     * Approves a held spend: the policy is checked again ({@link SvcPolicyViolationError} leaves it
     * waiting), then it is signed and broadcast; resolves to the transaction, now `pending` with its
     * `txHash`. One `Idempotency-Key` across retries, so a retried approve never pays twice; a spend
     * decided already gives {@link SvcValidationError} `already_decided` (409).
     * @example
     * const tx = await admin.approvals.approve("tx_…");
     * await wallet.waitForTransaction(tx.id); // confirmed
     */
    approve(transactionId: string, options?: RequestOptions): Promise<Transaction>;
    /**
     * Rejects a held spend: it ends `rejected` (`failureReason: "approval_rejected"`) and the daily limit
     * has its room back. Same retries and errors as `approve`.
     * @example
     * await admin.approvals.reject("tx_…");
     */
    reject(transactionId: string, options?: RequestOptions): Promise<Transaction>;
  };
  /**
   * Webhook endpoints (admin): the service posts each event to them, signed (check with
   * {@link verifyWebhook}), at least once, in order per endpoint.
   */
  readonly webhooks: {
    /**
     * Registers an endpoint; its signing `secret` (`whsec_…`) is in this response only.
     * @example
     * const { id, secret } = await admin.webhooks.create({ url: "https://example.com/hooks/svc", events: ["approval.requested"] });
     */
    create(input: CreateWebhookEndpointInput): Promise<CreatedWebhookEndpoint>;
    /**
     * The account's endpoints, without their secrets.
     * @example
     * const endpoints = await admin.webhooks.list();
     */
    list(): Promise<WebhookEndpoint[]>;
    /**
     * One endpoint, without its secret.
     * @example
     * const endpoint = await admin.webhooks.get("wh_…");
     */
    get(endpointId: string): Promise<WebhookEndpoint>;
    /**
     * Removes an endpoint; nothing more is delivered to it.
     * @example
     * await admin.webhooks.delete("wh_…");
     */
    delete(endpointId: string): Promise<void>;
    /**
     * The endpoint's delivery attempts, newest first, one entry each.
     * @example
     * const attempts = await admin.webhooks.deliveries("wh_…", { eventId: "evt_…" });
     */
    deliveries(endpointId: string, query?: WebhookDeliveryQuery): Promise<WebhookDelivery[]>;
    /**
     * Queues one more delivery of an event to the endpoint (one attempt, outside the endpoint's order,
     * logged with `redelivery: true`). The event must be of a type the endpoint receives
     * ({@link SvcValidationError} `event_not_subscribed` otherwise).
     * @example
     * await admin.webhooks.redeliver("wh_…", "evt_…");
     */
    redeliver(endpointId: string, eventId: string): Promise<void>;
    /**
     * Gives the endpoint a new signing secret, in this response only. Deliveries are signed with it at once,
     * and with the secret it replaces too for `previousSecretValidForSeconds` more (default a day, at most a
     * week; 0 for a leaked secret): time to give the receiver the new one.
     * @example
     * const { secret } = await admin.webhooks.rotateSecret("wh_…", { previousSecretValidForSeconds: 3600 });
     */
    rotateSecret(
      endpointId: string,
      options?: { previousSecretValidForSeconds?: number },
    ): Promise<RotatedWebhookEndpoint>;
  };
  /** x402: paid resources (paying them is `wallet.fetch`). */
  readonly x402: {
    /**
     * Payable resources listed by the service's facilitator (its Bazaar discovery), in its order.
     * `SvcInternalError` with reason `discovery_unavailable` when the facilitator lists none.
     * @example
     * const [weather] = await svc.x402.discover({ query: "weather", limit: 5 });
     * const response = await wallet.fetch(weather.resource);
     */
    discover(query?: X402DiscoverQuery): Promise<X402Service[]>;
  };
  /**
   * The gate's failed settlements and retries (spec 4.7). Present only when constructed with `authz`.
   * @example
   * const failed = svc.authz?.listFailedSettlements() ?? [];
   */
  declare readonly authz?: SpendGate;

  constructor(options: SvcWalletOptions = {}) {
    if (options === null || typeof options !== "object")
      throw badOption("SvcWallet expects an options object");
    for (const key of Object.keys(options)) {
      if (!OPTION_KEYS.has(key)) {
        throw badOption(
          `Unknown SvcWallet option ${JSON.stringify(key)}; known: ${[...OPTION_KEYS].join(", ")}`,
        );
      }
    }
    const { apiKey, authz } = options;
    if (apiKey !== undefined && (typeof apiKey !== "string" || apiKey === "")) {
      throw badOption("apiKey must be a non-empty string");
    }
    const baseUrl = options.baseUrl ?? DEFAULT_BASE_URL;
    if (!isServiceUrl(baseUrl)) {
      throw badOption(
        "baseUrl must be an http:// or https:// URL with no user name or password, e.g. http://127.0.0.1:8080/v1",
      );
    }
    if (options.fetch !== undefined && typeof options.fetch !== "function")
      throw badOption("fetch must be a function");
    const maxRetries = options.maxRetries ?? DEFAULT_MAX_RETRIES;
    if (!Number.isSafeInteger(maxRetries) || maxRetries < 0)
      throw badOption("maxRetries must be a non-negative integer");
    const retryRateLimited = options.retryRateLimited ?? true;
    if (typeof retryRateLimited !== "boolean") throw badOption("retryRateLimited must be a boolean");
    const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    // Whole milliseconds within what AbortSignal.timeout accepts, so a bad value fails here, not at a call.
    if (!Number.isSafeInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > 2 ** 32 - 1) {
      throw badOption("timeoutMs must be a whole number of milliseconds from 1 to 4294967295");
    }
    const fetchFn: FetchLike = options.fetch ?? ((input, init) => globalThis.fetch(input, init));

    const transport = new Transport({
      baseUrl: baseUrl.replace(/\/+$/, ""),
      apiKey,
      fetch: fetchFn,
      maxRetries,
      retryRateLimited,
      timeoutMs,
    });
    const gate = authz === undefined ? undefined : new SpendGate(authz, { fetch: fetchFn, timeoutMs });
    const ctx: ClientContext = {
      transport,
      network: new NetworkDirectory(transport),
      gate,
    };
    if (gate !== undefined) Object.defineProperty(this, "authz", { value: gate, enumerable: true });

    const wallet = (record: WalletRecord): Wallet => new Wallet(record, ctx);
    const id = (value: string, what: string): string => {
      const segment = pathSegment(value);
      if (segment === undefined) throw badOption(`${what} must be a non-empty string, and not . or ..`);
      return segment;
    };

    this.auth = {
      register: (input) =>
        transport.request<Account>({
          method: "POST",
          path: "/auth/register",
          body: input,
          idempotent: false,
          anonymous: true,
        }),
      login: (input) =>
        transport.request<LoginResult>({
          method: "POST",
          path: "/auth/login",
          body: input,
          idempotent: true,
          anonymous: true,
        }),
      me: () => transport.request<CurrentCredential>({ method: "GET", path: "/me", idempotent: true }),
      logout: async () => {
        // Not repeated: a repeat after a lost answer would meet the ended token (401).
        await transport.request<undefined>({ method: "POST", path: "/auth/logout", idempotent: false });
      },
    };
    this.apiKeys = {
      create: (input) =>
        transport.request<CreatedApiKey>({
          method: "POST",
          path: "/api-keys",
          body: strip(input),
          idempotent: false,
        }),
      list: () => transport.request<ApiKey[]>({ method: "GET", path: "/api-keys", idempotent: true }),
      revoke: async (keyId) => {
        await transport.request<undefined>({
          method: "DELETE",
          path: `/api-keys/${id(keyId, "keyId")}`,
          idempotent: true,
        });
      },
    };
    this.chains = { list: () => ctx.network.list(true) };
    this.wallet = {
      create: async (input) => {
        const body: Record<string, unknown> = { ...strip(input) };
        if (input.policy !== undefined) body.policy = policyBody(input.policy);
        return wallet(
          await transport.request<WalletRecord>({
            method: "POST",
            path: "/wallets",
            body,
            idempotent: false,
          }),
        );
      },
      list: async () =>
        (await transport.request<WalletRecord[]>({ method: "GET", path: "/wallets", idempotent: true })).map(
          wallet,
        ),
      get: async (walletId) =>
        wallet(
          await transport.request<WalletRecord>({
            method: "GET",
            path: `/wallets/${id(walletId, "walletId")}`,
            idempotent: true,
          }),
        ),
    };
    this.x402 = {
      discover: async (query = {}) => {
        if (query === null || typeof query !== "object") throw badOption("discover expects an object");
        const page = await transport.request<{ data: X402Service[] }>({
          method: "GET",
          path: "/x402/services",
          query: { category: query.category, query: query.query, limit: query.limit },
          idempotent: true,
        });
        return page.data;
      },
    };
    const listEvents = (query: EventQuery, signal?: AbortSignal): Promise<EventPage> => {
      if (query === null || typeof query !== "object") throw badOption("events.list expects an object");
      return transport.request<EventPage>({
        method: "GET",
        path: "/events",
        query: {
          after: query.after,
          type: typeParam(query.type),
          walletId: query.walletId,
          limit: query.limit,
        },
        idempotent: true,
        signal,
      });
    };
    this.events = {
      list: (query = {}) => listEvents(query),
      iterate: (options = {}) => {
        if (options === null || typeof options !== "object")
          throw badOption("events.iterate expects an object");
        const { follow = false, intervalMs = DEFAULT_EVENT_POLL_MS, signal, ...query } = options;
        if (!Number.isSafeInteger(intervalMs) || intervalMs < 0)
          throw badOption("events.iterate: `intervalMs` must be a whole number of milliseconds");
        typeParam(query.type);
        let cursor = query.after;
        async function* events(): AsyncGenerator<SvcEvent> {
          try {
            for (;;) {
              if (signal?.aborted) return;
              const page = await listEvents(
                cursor === undefined ? query : { ...query, after: cursor },
                signal,
              );
              yield* page.data;
              cursor = page.nextCursor;
              if (page.data.length === 0) {
                if (!follow) return;
                await sleep(intervalMs, signal);
              }
            }
          } catch (error) {
            // Aborting is how a follower stops: it ends the iteration, it is not a failure.
            if (signal?.aborted && (error === signal.reason || error instanceof SvcConnectionError)) return;
            throw error;
          }
        }
        return {
          get cursor() {
            return cursor;
          },
          [Symbol.asyncIterator]: events,
        };
      },
    };
    const decide =
      (decision: "approve" | "reject") =>
      (transactionId: string, options: RequestOptions = {}): Promise<Transaction> => {
        const idempotencyKey = options.idempotencyKey ?? globalThis.crypto.randomUUID();
        if (typeof idempotencyKey !== "string" || idempotencyKey.length < 1 || idempotencyKey.length > 255) {
          throw badOption(`approvals.${decision}: \`idempotencyKey\` must be 1 to 255 characters`);
        }
        return transport.request<Transaction>({
          method: "POST",
          path: `/approvals/${id(transactionId, "transactionId")}/${decision}`,
          idempotent: true,
          idempotencyKey,
          signal: options.signal,
        });
      };
    this.approvals = {
      list: async (query = {}) => {
        if (query === null || typeof query !== "object") throw badOption("approvals.list expects an object");
        const page = await transport.request<{ data: Approval[] }>({
          method: "GET",
          path: "/approvals",
          query: { status: query.status, limit: query.limit },
          idempotent: true,
        });
        return page.data;
      },
      approve: decide("approve"),
      reject: decide("reject"),
    };
    this.webhooks = {
      create: (input) =>
        transport.request<CreatedWebhookEndpoint>({
          method: "POST",
          path: "/webhook-endpoints",
          body: strip(input),
          idempotent: false,
        }),
      list: async () =>
        (
          await transport.request<{ data: WebhookEndpoint[] }>({
            method: "GET",
            path: "/webhook-endpoints",
            idempotent: true,
          })
        ).data,
      get: (endpointId) =>
        transport.request<WebhookEndpoint>({
          method: "GET",
          path: `/webhook-endpoints/${id(endpointId, "endpointId")}`,
          idempotent: true,
        }),
      delete: async (endpointId) => {
        await transport.request<undefined>({
          method: "DELETE",
          path: `/webhook-endpoints/${id(endpointId, "endpointId")}`,
          idempotent: true,
        });
      },
      deliveries: async (endpointId, query = {}) =>
        (
          await transport.request<{ data: WebhookDelivery[] }>({
            method: "GET",
            path: `/webhook-endpoints/${id(endpointId, "endpointId")}/deliveries`,
            query: { eventId: query.eventId, limit: query.limit },
            idempotent: true,
          })
        ).data,
      redeliver: async (endpointId, eventId) => {
        if (typeof eventId !== "string" || eventId === "")
          throw badOption("eventId must be a non-empty string");
        await transport.request<unknown>({
          method: "POST",
          path: `/webhook-endpoints/${id(endpointId, "endpointId")}/redeliver`,
          body: { eventId },
          // Each call asks for one more delivery: repeated only when the service surely did not act.
          idempotent: false,
        });
      },
      rotateSecret: (endpointId, options = {}) =>
        transport.request<RotatedWebhookEndpoint>({
          method: "POST",
          path: `/webhook-endpoints/${id(endpointId, "endpointId")}/rotate-secret`,
          body: strip(options),
          // Each call makes a new secret, shown once: repeated only when the service surely did not act.
          idempotent: false,
        }),
    };
    this.transactions = {
      get: async (transactionId) => {
        const tx = await transport.request<Transaction>({
          method: "GET",
          path: `/transactions/${id(transactionId, "transactionId")}`,
          idempotent: true,
        });
        await gate?.settleHeld(tx);
        return tx;
      },
    };
  }
}
