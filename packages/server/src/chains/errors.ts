import { AppError, errors } from "../internal/errors.ts";

/**
 * True when a chain call failed because the RPC endpoint could not be reached or did not answer in time
 * (as opposed to answering with an error), for viem's and `@solana/kit`'s errors alike.
 * @example isUnreachable(new TypeError("fetch failed")) // true
 */
export function isUnreachable(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e && depth < 6; depth++) {
    const name = (e as { name?: unknown }).name;
    if (name === "HttpRequestError" || name === "TimeoutError") return true;
    const text = String((e as { message?: unknown }).message ?? "");
    if (/fetch failed|ECONNREFUSED|ECONNRESET|ETIMEDOUT|socket hang up|HTTP error \(5\d\d\)/i.test(text))
      return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

/**
 * Runs a chain call for domain code: an unreachable endpoint becomes 502 `chain_unavailable` (the cause
 * is logged, never shown); other failures pass through.
 * @example const balance = await chainCall("base", () => client.getBalance(address, token));
 */
export async function chainCall<T>(chain: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    if (!(error instanceof AppError) && isUnreachable(error)) throw errors.chainUnavailable(chain, error);
    throw error;
  }
}

/**
 * Removes an RPC URL's path and query (where providers put their API keys) from an error and its causes,
 * so a failed chain call can be logged or wrapped without the key. Returns the same error.
 * @example throw scrubRpcUrl(error, "https://base-mainnet.example/v2/KEY") // "…https://base-mainnet.example/…"
 */
export function scrubRpcUrl<T>(error: T, rpcUrl: string): T {
  let origin: string;
  try {
    const parsed = new URL(rpcUrl);
    if ((parsed.pathname === "/" || parsed.pathname === "") && !parsed.search && !parsed.username)
      return error;
    origin = `${parsed.protocol}//${parsed.host}/…`;
  } catch {
    return error;
  }
  const secretForms = [rpcUrl, rpcUrl.replace(/\/$/, "")];
  const scrub = (text: string) => secretForms.reduce((out, form) => out.split(form).join(origin), text);
  for (let e: unknown = error, depth = 0; e && typeof e === "object" && depth < 8; depth++) {
    const record = e as Record<string, unknown>;
    for (const key of ["message", "shortMessage", "details", "url", "stack"]) {
      const value = record[key];
      if (typeof value === "string" && value.includes(secretForms[1] ?? rpcUrl)) {
        try {
          record[key] = scrub(value);
        } catch {}
      }
    }
    if (Array.isArray(record.metaMessages)) {
      record.metaMessages = record.metaMessages.map((m) => (typeof m === "string" ? scrub(m) : m));
    }
    e = record.cause;
  }
  return error;
}
