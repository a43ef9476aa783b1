import { isIP } from "node:net";
import { z } from "zod";

const port = z.coerce.number().int().min(0).max(65535);
const positiveInt = z.coerce.number().int().positive();

/**
 * A duration in milliseconds that a timer can wait: Node.js runs a longer timeout after 1 ms instead, which
 * would turn an interval of days into a busy loop.
 */
const milliseconds = positiveInt.max(2 ** 31 - 1, "must be at most 2147483647 (about 24.8 days)");

/** A 32-byte key given as base64. */
const base64Key32 = z
  .string()
  .refine((value) => /^[A-Za-z0-9+/]+={0,2}$/.test(value) && Buffer.from(value, "base64").length === 32, {
    message: "must be 32 bytes encoded as base64",
  })
  .transform((value) => Buffer.from(value, "base64"));

/** An IPv4 or IPv6 address, optionally with a /prefix length. */
function isAddressOrCidr(value: string): boolean {
  const [address = "", prefix, ...rest] = value.split("/");
  const version = isIP(address);
  if (version === 0 || rest.length > 0) return false;
  if (prefix === undefined) return true;
  return /^\d{1,3}$/.test(prefix) && Number(prefix) <= (version === 4 ? 32 : 128);
}

/**
 * A variable holding a comma list: each entry trimmed (and lower-cased when `lowercase`), then read by
 * `read`, which answers what the list keeps of it, or undefined for an entry the list does not take. One
 * issue names every such entry after `must be ${expected}`.
 */
function commaList(
  expected: string,
  read: (entry: string) => string | undefined,
  options: { lowercase?: boolean } = {},
) {
  return z.string().transform((value, ctx) => {
    const entries = value
      .split(",")
      .map((entry) => (options.lowercase ? entry.trim().toLowerCase() : entry.trim()))
      .filter(Boolean);
    const kept = entries.map(read);
    const bad = entries.filter((_, i) => kept[i] === undefined);
    if (bad.length === 0) return kept as string[];
    ctx.addIssue({
      code: "custom",
      message: `must be ${expected}; not ${bad.map((entry) => JSON.stringify(entry.slice(0, 60))).join(", ")}`,
    });
    return z.NEVER;
  });
}

/**
 * The proxies whose X-Forwarded-For is believed: a comma list of addresses and CIDR ranges. "true" (trust
 * whoever sends the header) is refused: any client could then pick the address its limits are counted by.
 */
const trustedProxies = commaList(
  "a comma-separated list of proxy addresses or CIDR ranges (e.g. 127.0.0.1,10.0.0.0/8)",
  (entry) => (isAddressOrCidr(entry) ? entry : undefined),
);

/** A hostname as DNS spells it: dot-separated labels of letters, digits and hyphens. */
const HOSTNAME = /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/;

/**
 * Destinations exempt from the outbound guard (x402 fetches): a comma list of CIDR ranges, addresses and
 * hostnames, e.g. `127.0.0.0/8,::1,localhost,internal.example`.
 */
const outboundAllow = commaList(
  "a comma-separated list of CIDR ranges, addresses and hostnames (e.g. 127.0.0.0/8,localhost)",
  (entry) => (isAddressOrCidr(entry) || HOSTNAME.test(entry) ? entry : undefined),
  { lowercase: true },
);

/**
 * The names, besides addresses, `localhost` and `*.localhost`, under which browsers may reach the service: a
 * comma list of hostnames, or `*` for any (a proxy in front checks them).
 */
const allowedHosts = commaList(
  "a comma-separated list of hostnames (e.g. wallet.example.com), or * for any",
  (entry) => (entry === "*" ? entry : requestHostName(entry)),
  { lowercase: true },
).transform((names, ctx) => {
  if (!names.includes("*")) return names;
  if (names.length === 1) return "any" as const;
  ctx.addIssue({ code: "custom", message: "must be * alone (any host), or host names without *" });
  return z.NEVER;
});

/**
 * A name as a request's `Host` carries it, spelled as browsers send it (a unicode name in its punycode form,
 * no final dot; `_` allowed, as in a container's name); undefined when the entry is more than a name.
 */
function requestHostName(entry: string): string | undefined {
  if (/[:/\\@?#\s*[\]%]/.test(entry)) return undefined;
  try {
    const name = new URL(`http://${entry}`).hostname.replace(/\.$/, "");
    return name === "" ? undefined : name;
  } catch {
    return undefined;
  }
}

/** What the devnet profile exempts by default: loopback, where its local demo resource and facilitator run. */
const DEVNET_OUTBOUND_ALLOW = ["127.0.0.0/8", "::1/128", "localhost"];

const httpUrl = z.string().regex(/^https?:\/\/\S+$/, "must be an http:// or https:// URL");
const usdPrice = z
  .string()
  .regex(/^(0|[1-9]\d*)(\.\d{1,6})?$/, "must be a decimal USD price with at most 6 decimals");
const tokenAmount = z.string().regex(/^(0|[1-9]\d*)(\.\d{1,18})?$/, "must be a decimal amount");

/** An EVM private key: 0x and 64 hex digits. */
const evmPrivateKey = z
  .string()
  .regex(/^0x[0-9a-fA-F]{64}$/, "must be 0x followed by 64 hex digits")
  .transform((value) => Buffer.from(value.slice(2), "hex"));

/** A Solana key in solana-keygen's file format (a JSON array of 64 bytes); its first 32 bytes are the seed. */
const solanaSecretKey = z.string().transform((value, ctx) => {
  let bytes: unknown;
  try {
    bytes = JSON.parse(value);
  } catch {}
  if (
    !Array.isArray(bytes) ||
    bytes.length !== 64 ||
    !bytes.every((b) => Number.isInteger(b) && b >= 0 && b <= 255)
  ) {
    ctx.addIssue({ code: "custom", message: "must be a JSON array of 64 bytes (solana-keygen format)" });
    return z.NEVER;
  }
  return Buffer.from((bytes as number[]).slice(0, 32));
});

const envSchema = z.object({
  PORT: port.default(8080),
  HOST: z.string().min(1).default("127.0.0.1"),
  SVC_DATA_DIR: z.string().min(1).default("./.svc-data"),
  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, "must be a postgres:// or postgresql:// URL")
    .optional(),
  SVC_MASTER_KEY: base64Key32.optional(),
  SVC_JWT_SECRET: z.string().min(32, "must be at least 32 characters").optional(),
  REDIS_URL: z
    .string()
    .regex(/^rediss?:\/\//, "must be a redis:// or rediss:// URL")
    .optional(),
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  SVC_RATE_LIMIT_PER_MINUTE: positiveInt.default(600),
  SVC_RATE_LIMIT_PER_ADDRESS_PER_MINUTE: positiveInt.default(1200),
  SVC_LOGIN_LIMIT_PER_MINUTE: positiveInt.default(10),
  SVC_REGISTER_LIMIT_PER_MINUTE: positiveInt.default(10),
  SVC_TRUST_PROXY: trustedProxies.default([]),
  SVC_CONFIRMER_INTERVAL_MS: milliseconds.default(1000),
  // Bounded so that expiry and retention dates stay dates: a held spend waits at most a year for its decision.
  SVC_APPROVAL_TTL_SECONDS: positiveInt.max(365 * 86_400, "must be at most 31536000 (a year)").default(3600),
  SVC_WEBHOOK_POLL_MS: milliseconds.default(200),
  SVC_REQUEST_TIMEOUT_MS: milliseconds.default(30_000),
  SVC_MAX_WALLETS_PER_ACCOUNT: positiveInt.default(1000),
  SVC_MAX_API_KEYS_PER_ACCOUNT: positiveInt.default(100),
  SVC_EVENT_RETENTION_DAYS: positiveInt.max(36_500, "must be at most 36500 (a hundred years)").default(30),
  SVC_NETWORK_PROFILE: z.enum(["devnet", "testnet", "mainnet"]).default("devnet"),
  SVC_RPC_BASE: httpUrl.optional(),
  SVC_RPC_ETHEREUM: httpUrl.optional(),
  SVC_RPC_ARBITRUM: httpUrl.optional(),
  SVC_RPC_SOLANA: httpUrl.optional(),
  SVC_RPC_BASE_SEPOLIA: httpUrl.optional(),
  SVC_RPC_SOLANA_DEVNET: httpUrl.optional(),
  SVC_USDC_BASE: z.string().min(1).optional(),
  SVC_USDC_ETHEREUM: z.string().min(1).optional(),
  SVC_USDC_ARBITRUM: z.string().min(1).optional(),
  SVC_USDC_SOLANA: z.string().min(1).optional(),
  SVC_USDC_BASE_SEPOLIA: z.string().min(1).optional(),
  SVC_USDC_SOLANA_DEVNET: z.string().min(1).optional(),
  SVC_PRICE_ETH_USD: usdPrice.optional(),
  SVC_PRICE_SOL_USD: usdPrice.optional(),
  SVC_WATCH_INTERVAL_MS: milliseconds.default(2000),
  SVC_FAUCET_DAILY_USDC: tokenAmount.default("1000"),
  SVC_FAUCET_DAILY_NATIVE: tokenAmount.default("10"),
  SVC_FAUCET_ACCOUNT_DAILY_USDC: tokenAmount.default("5000"),
  SVC_FAUCET_ACCOUNT_DAILY_NATIVE: tokenAmount.default("50"),
  SVC_FAUCET_EVM_PRIVATE_KEY: evmPrivateKey.optional(),
  SVC_FAUCET_SOLANA_SECRET_KEY: solanaSecretKey.optional(),
  SVC_AUTHZD_URL: httpUrl.optional(),
  SVC_AUTHZD_TOKEN: z.string().min(1).optional(),
  SVC_OUTBOUND_ALLOW: outboundAllow.optional(),
  SVC_ALLOWED_HOSTS: allowedHosts.default([]),
  SVC_X402_FACILITATOR_URL: httpUrl.optional(),
  // A paid fetch makes two requests; with both at most 25 s it ends within the minute that clients (the SDK)
  // and Idempotency-Key claims give a request.
  SVC_X402_FETCH_TIMEOUT_MS: milliseconds.max(25_000, "must be at most 25000").default(20_000),
  SVC_MCP_CONFIRM_ABOVE: z
    .string()
    .regex(/^(0|[1-9]\d{0,30})(\.\d{1,18})?$/, 'an amount of US dollars, e.g. "5" or "0.50"')
    .optional(),
});

/** Which networks stand behind the chain names: local chains, public test networks or mainnets. */
export type NetworkProfile = "devnet" | "testnet" | "mainnet";

/** Every chain name a profile can serve (stable API words), and its suffix in `SVC_RPC_*` / `SVC_USDC_*`. */
export const CHAIN_ENV_SUFFIX = {
  base: "BASE",
  ethereum: "ETHEREUM",
  arbitrum: "ARBITRUM",
  solana: "SOLANA",
  "base-sepolia": "BASE_SEPOLIA",
  "solana-devnet": "SOLANA_DEVNET",
} as const;

/** A chain name some profile serves. */
export type ChainName = keyof typeof CHAIN_ENV_SUFFIX;

/** Fixed prices of the devnet's native coins, so local balances show a USD value. */
const DEVNET_PRICES = { ETH: "3000", SOL: "150" } as const;

/** The chains the service talks to, and how it watches and funds them. */
export interface NetworkConfig {
  profile: NetworkProfile;
  /** RPC endpoint per chain name where configured; the profile's public default otherwise. */
  rpcUrls: Partial<Record<ChainName, string>>;
  /** USDC contract (EVM) or mint (Solana) per chain name, overriding the profile's. */
  usdcAddresses: Partial<Record<ChainName, string>>;
  /** USD per whole native coin, as decimal strings; absent means unknown (shown as `usdValue: null`). */
  usdPrices: { ETH?: string; SOL?: string };
  /** How often the incoming-transfer watcher polls each chain. */
  watchIntervalMs: number;
  faucet: FaucetConfig;
}

/** The faucet's daily caps and, where the service does not start the chains itself, its funded keys. */
export interface FaucetConfig {
  /** Per wallet, chain and rolling 24 h, in whole tokens (decimal strings). */
  dailyUsdc: string;
  dailyNative: string;
  /** Per account (all its wallets together), chain and rolling 24 h, in whole tokens. */
  accountDailyUsdc: string;
  accountDailyNative: string;
  /** 32-byte secp256k1 secret of a funded account on the test EVM chains. */
  evmPrivateKey: Buffer | undefined;
  /** 32-byte ed25519 seed of a funded account on the test Solana chain. */
  solanaSeed: Buffer | undefined;
}

/** Requests allowed per fixed one-minute window, by what is being limited. */
export interface RateLimits {
  /** Per credential (API key or access token). */
  perCredential: number;
  /** Per client address, over every route. */
  perAddress: number;
  /** Login attempts per email and per client address. */
  loginAttempts: number;
  /** Registrations per client address. */
  registrations: number;
}

/** The service's configuration, parsed once from the environment at start-up. */
export interface Config {
  port: number;
  host: string;
  dataDir: string;
  databaseUrl: string | undefined;
  /** When absent, the embedded default generates one into the data directory. */
  masterKey: Buffer | undefined;
  /** When absent, the embedded default generates one into the data directory. */
  jwtSecret: string | undefined;
  redisUrl: string | undefined;
  logLevel: string;
  rateLimits: RateLimits;
  /** Proxy addresses and CIDR ranges whose X-Forwarded-For gives the client address; empty = trust none. */
  trustProxy: string[];
  /** How often pending spends are checked against their chain. */
  confirmerIntervalMs: number;
  /** How long a spend above `approvalAbove` waits for an admin's decision before it expires. */
  approvalTtlSeconds: number;
  /**
   * How often the webhook deliverer looks for events to send: an event reaches its endpoints about this long
   * (at most) after it commits.
   */
  webhookPollMs: number;
  /**
   * How long a client has to send a whole request (headers and body); one slower is answered 408 and its
   * connection closed, so requests that never finish cannot hold connections for good.
   */
  requestTimeoutMs: number;
  /**
   * What one account may hold: wallets (archived ones included: each is still watched for receives, so
   * the receive scans of every account grow with them) and API keys that are not revoked.
   */
  accountLimits: { wallets: number; apiKeys: number };
  /**
   * How long events are kept (`GET /v1/events`, webhook deliveries): older ones are deleted hourly, with
   * their delivery records.
   */
  eventRetentionDays: number;
  network: NetworkConfig;
  /**
   * The authorization daemon that spend decisions are verified with, as the service's own identity (holding
   * `wallet.spend.verify`); absent, a spend carrying a decision id is refused.
   */
  authzd: { url: string; token: string } | undefined;
  /**
   * CIDR ranges, addresses and hostnames that outbound requests (x402 fetches) may reach although they are
   * private, loopback or link-local. Default: none; on the devnet profile, loopback.
   */
  outboundAllow: string[];
  /**
   * Host names a request may name (its `Host`, and from a trusted proxy its `X-Forwarded-Host` too) besides addresses,
   * `localhost` and `*.localhost`; `any` turns the check off (http/host-check.ts says why).
   */
  allowedHosts: string[] | "any";
  /**
   * The x402 facilitator whose discovery endpoint (`/discovery/resources`) lists payable services. On the
   * devnet profile without it, the local demo's facilitator.
   */
  x402FacilitatorUrl: string | undefined;
  /**
   * How long `POST /v1/x402/fetch` waits for a resource's answer, redirects and body included, in ms: the
   * unpaid request and the paid one each have this long.
   */
  x402FetchTimeoutMs: number;
  /**
   * USD: at `/mcp`, a spend (send, fetch_paid) worth more asks the person through MCP elicitation first
   * (`SVC_MCP_CONFIRM_ABOVE`). Default: never ask.
   */
  mcpConfirmAboveUsd: string | undefined;
}

/** Thrown when the environment holds a bad value; its message is one line per bad variable. */
export class ConfigError extends Error {
  override name = "ConfigError";
}

/**
 * Parses the environment into a {@link Config}. The only place that reads `process.env`.
 * @example
 * const config = loadConfig(process.env);
 */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  // An empty variable means "not set", as most deployment tools write it.
  const present = Object.fromEntries(Object.entries(env).filter(([, value]) => value !== ""));
  const parsed = envSchema.safeParse(present);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((issue) => `${issue.path.join(".")}: ${issue.message}`);
    throw new ConfigError(`Invalid configuration: ${lines.join("; ")}`);
  }
  const e = parsed.data;
  return {
    port: e.PORT,
    host: e.HOST,
    dataDir: e.SVC_DATA_DIR,
    databaseUrl: e.DATABASE_URL,
    masterKey: e.SVC_MASTER_KEY,
    jwtSecret: e.SVC_JWT_SECRET,
    redisUrl: e.REDIS_URL,
    logLevel: e.LOG_LEVEL,
    rateLimits: {
      perCredential: e.SVC_RATE_LIMIT_PER_MINUTE,
      perAddress: e.SVC_RATE_LIMIT_PER_ADDRESS_PER_MINUTE,
      loginAttempts: e.SVC_LOGIN_LIMIT_PER_MINUTE,
      registrations: e.SVC_REGISTER_LIMIT_PER_MINUTE,
    },
    trustProxy: e.SVC_TRUST_PROXY,
    confirmerIntervalMs: e.SVC_CONFIRMER_INTERVAL_MS,
    approvalTtlSeconds: e.SVC_APPROVAL_TTL_SECONDS,
    webhookPollMs: e.SVC_WEBHOOK_POLL_MS,
    requestTimeoutMs: e.SVC_REQUEST_TIMEOUT_MS,
    accountLimits: { wallets: e.SVC_MAX_WALLETS_PER_ACCOUNT, apiKeys: e.SVC_MAX_API_KEYS_PER_ACCOUNT },
    eventRetentionDays: e.SVC_EVENT_RETENTION_DAYS,
    network: networkConfig(e),
    authzd: authzdConfig(e),
    allowedHosts: e.SVC_ALLOWED_HOSTS,
    outboundAllow:
      e.SVC_OUTBOUND_ALLOW ?? (e.SVC_NETWORK_PROFILE === "devnet" ? [...DEVNET_OUTBOUND_ALLOW] : []),
    x402FacilitatorUrl: e.SVC_X402_FACILITATOR_URL?.replace(/\/+$/, ""),
    x402FetchTimeoutMs: e.SVC_X402_FETCH_TIMEOUT_MS,
    mcpConfirmAboveUsd: e.SVC_MCP_CONFIRM_ABOVE,
  };
}

/** Both variables or neither: a daemon URL without the service's token could verify nothing. */
function authzdConfig(e: z.infer<typeof envSchema>): Config["authzd"] {
  if (e.SVC_AUTHZD_URL === undefined && e.SVC_AUTHZD_TOKEN === undefined) return undefined;
  if (e.SVC_AUTHZD_URL === undefined || e.SVC_AUTHZD_TOKEN === undefined) {
    const missing = e.SVC_AUTHZD_URL === undefined ? "SVC_AUTHZD_URL" : "SVC_AUTHZD_TOKEN";
    const given = missing === "SVC_AUTHZD_URL" ? "SVC_AUTHZD_TOKEN" : "SVC_AUTHZD_URL";
    throw new ConfigError(`Invalid configuration: ${missing}: required when ${given} is set`);
  }
  return { url: e.SVC_AUTHZD_URL.replace(/\/+$/, ""), token: e.SVC_AUTHZD_TOKEN };
}

/** The chain settings, checked across variables (an external devnet needs both chains and their tokens). */
function networkConfig(e: z.infer<typeof envSchema>): NetworkConfig {
  const rpcUrls: Partial<Record<ChainName, string>> = {};
  const usdcAddresses: Partial<Record<ChainName, string>> = {};
  for (const [name, suffix] of Object.entries(CHAIN_ENV_SUFFIX) as [ChainName, string][]) {
    const rpc = e[`SVC_RPC_${suffix}` as keyof typeof e];
    const usdc = e[`SVC_USDC_${suffix}` as keyof typeof e];
    if (typeof rpc === "string") rpcUrls[name] = rpc;
    if (typeof usdc === "string") usdcAddresses[name] = usdc;
  }
  const problems: string[] = [];
  if (e.SVC_NETWORK_PROFILE === "devnet" && (rpcUrls.base || rpcUrls.solana)) {
    // Without RPC URLs the service starts the local chains itself; with them it uses a devnet run elsewhere.
    for (const [name, suffix] of [
      ["base", "BASE"],
      ["solana", "SOLANA"],
    ] as const) {
      if (!rpcUrls[name]) problems.push(`SVC_RPC_${suffix}: required when another devnet RPC URL is set`);
      else if (!usdcAddresses[name])
        problems.push(`SVC_USDC_${suffix}: required with SVC_RPC_${suffix} on the devnet profile`);
    }
  }
  if (problems.length > 0) throw new ConfigError(`Invalid configuration: ${problems.join("; ")}`);
  const devnet = e.SVC_NETWORK_PROFILE === "devnet";
  const eth = e.SVC_PRICE_ETH_USD ?? (devnet ? DEVNET_PRICES.ETH : undefined);
  const sol = e.SVC_PRICE_SOL_USD ?? (devnet ? DEVNET_PRICES.SOL : undefined);
  return {
    profile: e.SVC_NETWORK_PROFILE,
    rpcUrls,
    usdcAddresses,
    usdPrices: { ...(eth ? { ETH: eth } : {}), ...(sol ? { SOL: sol } : {}) },
    watchIntervalMs: e.SVC_WATCH_INTERVAL_MS,
    faucet: {
      dailyUsdc: e.SVC_FAUCET_DAILY_USDC,
      dailyNative: e.SVC_FAUCET_DAILY_NATIVE,
      accountDailyUsdc: e.SVC_FAUCET_ACCOUNT_DAILY_USDC,
      accountDailyNative: e.SVC_FAUCET_ACCOUNT_DAILY_NATIVE,
      evmPrivateKey: e.SVC_FAUCET_EVM_PRIVATE_KEY,
      solanaSeed: e.SVC_FAUCET_SOLANA_SECRET_KEY,
    },
  };
}
