import type { TokenInfo } from "../chains/types.ts";
import { parseUnitsStrict, USD_DECIMALS } from "../internal/money.ts";

/**
 * The USD value of `amount` atomic units of `token`, in micro-dollars, rounded up (a limit is never passed
 * by rounding). `undefined` when the token has no known price: the caller refuses rather than guesses.
 * @example usdMicros({ symbol: "USDC", decimals: 6, usdPrice: "1", address: "…" }, 2_500_000n) // 2_500_000n
 */
export function usdMicros(token: TokenInfo, amount: bigint): bigint | undefined {
  if (token.usdPrice === undefined) return undefined;
  const priceMicros = parseUnitsStrict(token.usdPrice, USD_DECIMALS);
  if (priceMicros === undefined) return undefined;
  const scale = 10n ** BigInt(token.decimals);
  return (amount * priceMicros + scale - 1n) / scale;
}
