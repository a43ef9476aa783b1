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
