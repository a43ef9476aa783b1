import path from "node:path";

/** Allow-lists for the facts of a spend; `null` admits any value. */
export interface AllowLists {
  providers: ReadonlySet<string> | null;
  networks: ReadonlySet<string> | null;
  assets: ReadonlySet<string> | null;
  destinations: ReadonlySet<string> | null;
}

/** Daemon configuration, parsed once from the environment at start-up. */
export interface Config {
  host: string;
  /** 0 asks the OS for a free port; the bound port is printed and written to `daemon.json`. */
  port: number;
  home: string;
  spendAuthzEnabled: boolean;
  /** Budget of every payer that has no budget of its own, in credits per window. */
  defaultBudgetCredits: number;
  budgetWindowMs: number;
  reservationTtlMs: number;
  /** Highest `per_call_cap` (atomic units) for identities without a ceiling of their own; null: none. */
  maxPerCallCap: string | null;
  /** Token bucket per identity on `/spend/*`; null when switched off. */
  spendRateLimit: RateLimit | null;
  allow: AllowLists;
}

/** A token bucket: `perSecond` sustained, up to `burst` at once. */
export interface RateLimit {
  perSecond: number;
  burst: number;
}

/** Canonical atomic-unit amount: decimal digits, no sign, fraction or leading zeros. */
export const ATOMIC_AMOUNT = /^(0|[1-9][0-9]{0,77})$/;

/** Thrown when one or more variables are invalid; the message has one line per bad variable. */
export class ConfigError extends Error {
  override readonly name = "ConfigError";
}

type Env = Readonly<Record<string, string | undefined>>;

/** The longest reservation time: a reservation is a spend in flight, and a month is far past any. */
export const MAX_RESERVATION_TTL_MS = 30 * 86_400_000;

/**
 * Parses the daemon's environment variables. This is the only place that reads `process.env`.
 *
 * @example
 * const config = loadConfig({ AUTHZD_PORT: "0", SPEND_AUTHZ_ENABLED: "1" });
 * config.port; // 0
 */
export function loadConfig(env: Env = process.env): Config {
  const problems: string[] = [];
  const int = (name: string, fallback: number, min: number, max: number): number => {
    const raw = env[name];
    if (raw === undefined || raw === "") return fallback;
    const value = Number(raw);
    if (!/^\d+$/.test(raw) || !Number.isSafeInteger(value) || value < min || value > max) {
      problems.push(`${name}: expected an integer between ${min} and ${max}, got "${raw}"`);
      return fallback;
    }
    return value;
  };
  const seconds = (name: string, fallback: number, max = 366 * 86_400): number => {
    const raw = env[name];
    if (raw === undefined || raw === "") return fallback * 1000;
    const value = Number(raw);
    // At least a millisecond once rounded: a time that rounds to none made every approval expire as made.
    if (!/^\d+(\.\d+)?$/.test(raw) || Math.round(value * 1000) < 1 || value > max) {
      problems.push(`${name}: expected a number of seconds from 0.001 to ${max}, got "${raw}"`);
      return fallback * 1000;
    }
    return Math.round(value * 1000);
  };
  const list = (name: string): ReadonlySet<string> | null => {
    const raw = env[name];
    if (raw === undefined || raw.trim() === "") return null;
    return new Set(
      raw
        .split(",")
        .map((item) => normalizeFact(item.trim()))
        .filter((item) => item !== ""),
    );
  };
  const atomic = (name: string): string | null => {
    const raw = env[name];
    if (raw === undefined || raw === "") return null;
    if (!ATOMIC_AMOUNT.test(raw)) {
      problems.push(
        `${name}: expected a decimal amount of atomic units without sign, fraction or leading zeros, got "${raw}"`,
      );
      return null;
    }
    return raw;
  };
  const maxPerCallCap = atomic("AUTHZD_MAX_PER_CALL_CAP");
  const ratePerSecond = int("AUTHZD_SPEND_RATE_LIMIT_PER_SECOND", 50, 0, 1_000_000_000);
  const rateBurst = int("AUTHZD_SPEND_RATE_LIMIT_BURST", 100, 1, 1_000_000_000);
  const enabledRaw = env.SPEND_AUTHZ_ENABLED;
  if (enabledRaw !== undefined && !["", "0", "1"].includes(enabledRaw)) {
    problems.push(`SPEND_AUTHZ_ENABLED: expected 1 or 0, got "${enabledRaw}"`);
  }
  const config: Config = {
    host: env.AUTHZD_HOST || "127.0.0.1",
    port: int("AUTHZD_PORT", 8421, 0, 65535),
    // npm runs workspace scripts inside the package; INIT_CWD is where the user typed the command,
    // so `npm run authzd` and `npx authzd …` from the same directory share one home.
    home: path.resolve(env.INIT_CWD || process.cwd(), env.AUTHZD_HOME || ".authzd"),
    spendAuthzEnabled: enabledRaw === "1",
    defaultBudgetCredits: int("AUTHZD_BUDGET_CREDITS", 1000, 0, Number.MAX_SAFE_INTEGER),
    budgetWindowMs: seconds("AUTHZD_BUDGET_WINDOW_SECONDS", 86_400),
    reservationTtlMs: seconds("AUTHZD_RESERVATION_TTL_SECONDS", 600, MAX_RESERVATION_TTL_MS / 1000),
    maxPerCallCap,
    // 0 switches the limiter off (the benchmark does, to measure the daemon rather than the limiter).
    spendRateLimit: ratePerSecond === 0 ? null : { perSecond: ratePerSecond, burst: rateBurst },
    allow: {
      providers: list("AUTHZD_ALLOW_PROVIDERS"),
      networks: list("AUTHZD_ALLOW_NETWORKS"),
      assets: list("AUTHZD_ALLOW_ASSETS"),
      destinations: list("AUTHZD_ALLOW_DESTINATIONS"),
    },
  };
  if (problems.length > 0) throw new ConfigError(problems.join("\n"));
  return config;
}

/** Explicit daemon URL for the CLI (`AUTHZD_URL`), if set. */
export function cliDaemonUrl(env: Env = process.env): string | undefined {
  return env.AUTHZD_URL || undefined;
}

/**
 * Normalises a spend fact for allow-list comparison: EVM-style hex addresses are case-insensitive
 * (checksummed and lower-case spellings name the same account), everything else compares exactly.
 *
 * @example
 * normalizeFact("0xAbC"); // "0xabc"
 */
export function normalizeFact(value: string): string {
  return /^0x[0-9a-fA-F]+$/.test(value) ? value.toLowerCase() : value;
}
