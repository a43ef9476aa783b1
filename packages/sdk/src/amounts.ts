/**
 * Exact amount handling: decimal strings and integer atomic units (bigint). No float arithmetic touches
 * an amount; a JS number given by a caller is converted once, by its shortest round-trip decimal form.
 */
import { SvcValidationError } from "./errors.ts";

const DECIMAL = /^(0|[1-9]\d*)(?:\.(\d+))?$/;

function invalidAmount(message: string): SvcValidationError {
  return new SvcValidationError({ code: "ValidationError", status: 0, message, reason: "invalid_amount" });
}

/**
 * The shortest decimal string that reads back as `value` (JavaScript's own `String(value)`), written out
 * without an exponent: `0.1` → `"0.1"`, `1e-7` → `"0.0000001"`, `1e21` → `"1000000000000000000000"`.
 * Throws {@link SvcValidationError} for `NaN`, infinities and negative numbers.
 * @example
 * decimalFromNumber(2.5); // "2.5"
 */
export function decimalFromNumber(value: number): string {
  if (Number.isNaN(value)) throw invalidAmount("Amount is NaN");
  if (!Number.isFinite(value)) throw invalidAmount(`Amount is ${value > 0 ? "Infinity" : "-Infinity"}`);
  if (value < 0) throw invalidAmount(`Amount ${value} is negative`);
  const text = String(value === 0 ? 0 : value);
  const match = /^(\d+)(?:\.(\d+))?e([+-]\d+)$/.exec(text);
  if (!match) return text;
  const digits = (match[1] ?? "") + (match[2] ?? "");
  // Position of the decimal point within `digits` after applying the exponent.
  const point = (match[1] ?? "").length + Number(match[3]);
  if (point <= 0) return `0.${"0".repeat(-point)}${digits}`;
  if (point >= digits.length) return digits + "0".repeat(point - digits.length);
  return `${digits.slice(0, point)}.${digits.slice(point)}`;
}

/**
 * Checks an amount given as a number or a decimal string against a token's decimals and returns its
 * decimal string. Throws {@link SvcValidationError} (reason `invalid_amount`, nothing sent) for `NaN`,
 * infinities, negatives, malformed strings and more fractional digits than the token has.
 * @example
 * toDecimalAmount(10, 6, "USDC"); // "10"
 * toDecimalAmount("0.0000001", 6, "USDC"); // throws: USDC has 6 decimals
 */
export function toDecimalAmount(amount: number | string, decimals: number, symbol: string): string {
  let text: string;
  if (typeof amount === "number") text = decimalFromNumber(amount);
  else if (typeof amount === "string") text = amount.trim();
  else throw invalidAmount(`Amount must be a number or a decimal string, not ${typeof amount}`);
  if (text.startsWith("-")) throw invalidAmount(`Amount ${JSON.stringify(text)} is negative`);
  const match = DECIMAL.exec(text);
  if (!match) {
    throw invalidAmount(
      `Amount ${JSON.stringify(text.slice(0, 40))} is not a decimal number (digits, at most one ".", no sign or exponent)`,
    );
  }
  if ((match[2] ?? "").length > decimals) {
    throw invalidAmount(`Amount ${text} has more decimals than ${symbol} (${decimals})`);
  }
  return text;
}

/**
 * A validated decimal string (see {@link toDecimalAmount}) in atomic units.
 * @example
 * toAtomic("1.5", 6); // 1500000n
 */
export function toAtomic(decimal: string, decimals: number): bigint {
  const match = DECIMAL.exec(decimal);
  if (!match || (match[2] ?? "").length > decimals) throw invalidAmount(`Amount ${decimal} is not exact`);
  const fraction = (match[2] ?? "").padEnd(decimals, "0");
  return BigInt(match[1] ?? "0") * 10n ** BigInt(decimals) + BigInt(fraction === "" ? "0" : fraction);
}

/**
 * A non-negative decimal string as an exact fraction `value / 10^scale`; undefined when malformed.
 * @example
 * parseDecimal("150.25"); // { value: 15025n, scale: 100n }
 */
export function parseDecimal(text: string): { value: bigint; scale: bigint } | undefined {
  const match = DECIMAL.exec(text);
  if (!match) return undefined;
  const fraction = match[2] ?? "";
  return { value: BigInt((match[1] ?? "0") + fraction), scale: 10n ** BigInt(fraction.length) };
}

/**
 * The spend's value in whole US cents, rounded up, at least 1: the `credits` the gate asks the daemon for.
 * `usdPrice` is USD per whole token as the service states it (`"1"` for stablecoins). Undefined when the
 * price is unknown or malformed.
 * @example
 * creditsFor(1_500_000n, 6, "1"); // 150 (1.50 USDC)
 * creditsFor(1n, 6, "1"); // 1 (a micro-cent still costs one credit)
 */
export function creditsFor(
  atomic: bigint,
  decimals: number,
  usdPrice: string | undefined,
): number | undefined {
  if (usdPrice === undefined) return undefined;
  const price = parseDecimal(usdPrice);
  if (price === undefined) return undefined;
  const numerator = atomic * price.value * 100n;
  const denominator = 10n ** BigInt(decimals) * price.scale;
  const cents = (numerator + denominator - 1n) / denominator;
  const credits = cents < 1n ? 1n : cents;
  return credits > BigInt(Number.MAX_SAFE_INTEGER) ? undefined : Number(credits);
}

/**
 * A USD bound (the policy's `maxPerTx`) in atomic units of a token at `usdPrice`, rounded down (the cap
 * never allows more than the bound). Undefined when the price is unknown, zero or malformed.
 * @example
 * usdToAtomicCap("10", 6, "1"); // 10000000n
 * usdToAtomicCap("3000", 18, "3000"); // 1000000000000000000n (1 ETH)
 */
export function usdToAtomicCap(
  usd: string,
  decimals: number,
  usdPrice: string | undefined,
): bigint | undefined {
  const bound = parseDecimal(usd);
  const price = usdPrice === undefined ? undefined : parseDecimal(usdPrice);
  if (bound === undefined || price === undefined || price.value === 0n) return undefined;
  // (bound.value / bound.scale) / (price.value / price.scale) * 10^decimals
  return (bound.value * price.scale * 10n ** BigInt(decimals)) / (bound.scale * price.value);
}
