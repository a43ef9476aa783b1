import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { DEFAULT_BASE_URL } from "@svc/sdk";
import { CliError, EXIT } from "./failure.ts";

/**
 * What `svc login` writes: the service's base URL and an admin API key created for this CLI. A key rather
 * than the login access token because the token expires after an hour; the key lasts until revoked
 * (`svc keys revoke <keyId>`). Beside it the last login's device token (no credential; `svc logout` keeps
 * it): the next `svc login` sends it, and the service counts that login for this device rather than the
 * email, so others guessing the password cannot keep this user out.
 * @example
 * const saved: SavedConfig = { baseUrl: "http://127.0.0.1:8080/v1", apiKey: "svc_…", keyId: "key_…", email: "ada@example.com" };
 */
export interface SavedConfig {
  baseUrl?: string;
  apiKey?: string;
  keyId?: string;
  email?: string;
  deviceToken?: string;
}

/** Where credentials come from, in precedence order: flags, then environment, then the config file. */
export interface CredentialSources {
  flags: { apiKey?: string | undefined; baseUrl?: string | undefined };
  env: NodeJS.ProcessEnv;
}

/**
 * The config file: `$SVC_CONFIG`, else `$XDG_CONFIG_HOME/svc/config.json`, else `~/.config/svc/config.json`.
 * @example
 * configPath(process.env); // "/home/ada/.config/svc/config.json"
 */
export function configPath(env: NodeJS.ProcessEnv): string {
  if (env.SVC_CONFIG) return path.resolve(env.SVC_CONFIG);
  const base = env.XDG_CONFIG_HOME ? env.XDG_CONFIG_HOME : path.join(os.homedir(), ".config");
  return path.join(base, "svc", "config.json");
}

/**
 * Reads the config file; an absent file is an empty config, an unreadable one a usage error naming it.
 * @example
 * const saved = await readConfig(configPath(process.env));
 */
export async function readConfig(file: string): Promise<SavedConfig> {
  let text: string;
  try {
    text = await fs.readFile(file, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return {};
    throw new CliError(`Cannot read ${file}: ${(error as Error).message}`, EXIT.usage);
  }
  try {
    const parsed: unknown = JSON.parse(text);
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed))
      throw new Error("not an object");
    const saved = parsed as Record<string, unknown>;
    const config: SavedConfig = {};
    for (const field of ["baseUrl", "apiKey", "keyId", "email", "deviceToken"] as const) {
      if (typeof saved[field] === "string") config[field] = saved[field];
    }
    return config;
  } catch {
    throw new CliError(`${file} is not a JSON object; run svc login again or fix it`, EXIT.usage);
  }
}

/**
 * Writes the config file readable by its owner only (0600, its directory 0700), also when it existed with
 * wider permissions: it holds an admin key.
 * @example
 * await writeConfig(configPath(process.env), { baseUrl, apiKey, keyId, email });
 */
export async function writeConfig(file: string, config: SavedConfig): Promise<void> {
  await fs.mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  const temporary = `${file}.${process.pid}.tmp`;
  await fs.writeFile(temporary, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
  await fs.chmod(temporary, 0o600);
  // A rename replaces the file whole: a crash never leaves half a config, nor the old file's mode.
  await fs.rename(temporary, file);
}

/**
 * The service URL as the SDK wants it (ending in `/v1`); a bare origin (`http://host:8080`) gets `/v1`.
 * @example
 * normalizeBaseUrl("http://127.0.0.1:8080"); // "http://127.0.0.1:8080/v1"
 */
export function normalizeBaseUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new CliError(
      `Base URL ${JSON.stringify(withoutUserInfo(value))} is not a URL, e.g. http://127.0.0.1:8080/v1`,
      EXIT.usage,
    );
  }
  // Never repeated: such a URL is refused by fetch anyway, and the password would be printed with it.
  if (url.username !== "" || url.password !== "") {
    throw new CliError(
      "Base URL must not hold a user name or password: give the service's address alone (the API key goes in --api-key or SVC_API_KEY)",
      EXIT.usage,
    );
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new CliError(
      `Base URL ${JSON.stringify(withoutUserInfo(value))} must be http:// or https://`,
      EXIT.usage,
    );
  }
  const trimmed = value.replace(/\/+$/, "");
  return url.pathname === "/" || url.pathname === "" ? `${trimmed}/v1` : trimmed;
}

/**
 * A base URL as an error repeats it: what could be a user name and password (up to its last `@`) left out. Not
 * up to the first `/` only: a password typed unencoded can hold one.
 */
function withoutUserInfo(value: string): string {
  return value.replace(/^([a-z][a-z0-9+.-]*:\/\/)?.*@/is, "$1…@");
}

/**
 * The base URL and API key to use, each from the first source that has it: `--base-url` / `--api-key`,
 * then `SVC_BASE_URL` / `SVC_API_KEY`, then the config file; the base URL defaults to the local service.
 * The config file's key goes only to the service it was saved for (`svc login` saves the two together):
 * with another base URL it is left out, and `savedKeyFor` says where it belongs.
 * @example
 * const { baseUrl, apiKey } = resolveCredentials({ flags: { apiKey: undefined, baseUrl: undefined }, env: process.env }, saved);
 */
export function resolveCredentials(
  sources: CredentialSources,
  saved: SavedConfig,
): { baseUrl: string; apiKey: string | undefined; savedKeyFor?: string } {
  const pick = (...values: (string | undefined)[]): string | undefined =>
    values.find((value) => value !== undefined && value !== "");
  const baseUrl = normalizeBaseUrl(
    pick(sources.flags.baseUrl, sources.env.SVC_BASE_URL, saved.baseUrl) ?? DEFAULT_BASE_URL,
  );
  const savedFor = savedKeyBaseUrl(saved);
  const savedKey = savedFor === baseUrl ? saved.apiKey : undefined;
  const apiKey = pick(sources.flags.apiKey, sources.env.SVC_API_KEY, savedKey);
  const elsewhere = apiKey === undefined && pick(saved.apiKey) !== undefined;
  return { baseUrl, apiKey, ...(elsewhere ? { savedKeyFor: savedFor ?? String(saved.baseUrl) } : {}) };
}

/**
 * The service the config file's key was saved for: its base URL (`svc login` saves the two together), the
 * local service when it names none; undefined when what it names is not a URL (no service gets the key).
 */
export function savedKeyBaseUrl(saved: SavedConfig): string | undefined {
  try {
    return normalizeBaseUrl(saved.baseUrl || DEFAULT_BASE_URL);
  } catch {
    return undefined;
  }
}
