import { z } from "zod";

const port = z.coerce.number().int().min(0).max(65535);
const positiveInt = z.coerce.number().int().positive();

/** A 32-byte key given as base64. */
const base64Key32 = z
  .string()
  .refine((value) => /^[A-Za-z0-9+/]+={0,2}$/.test(value) && Buffer.from(value, "base64").length === 32, {
    message: "must be 32 bytes encoded as base64",
  })
  .transform((value) => Buffer.from(value, "base64"));

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
  SVC_TRUST_PROXY: z.enum(["true", "false"]).default("false"),
  SVC_CONFIRMER_INTERVAL_MS: positiveInt.default(1000),
});

/** Requests allowed per fixed one-minute window, by what is being limited. */
export interface RateLimits {
  /** Per credential (API key or access token). */
  perCredential: number;
  /** Per client address, over every route. */
  perAddress: number;
  /** Login attempts per email and per client address. */
  loginAttempts: number;
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
  trustProxy: boolean;
  /** How often pending spends are checked against their chain. */
  confirmerIntervalMs: number;
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
    },
    trustProxy: e.SVC_TRUST_PROXY === "true",
    confirmerIntervalMs: e.SVC_CONFIRMER_INTERVAL_MS,
  };
}
