/** Exact conversions between decimal strings and integer atomic units. No floats anywhere. */

const DECIMAL = /^(0|[1-9]\d*)(?:\.(\d+))?$/;

/**
 * Parses a non-negative decimal string into atomic units, refusing more fractional digits than `decimals`.
 * Returns `undefined` for anything that is not such a number.
 * @example parseUnitsStrict("1.5", 6) // 1500000n
 */
export function parseUnitsStrict(value: string, decimals: number): bigint | undefined {
  const match = DECIMAL.exec(value);
  if (!match) return undefined;
  const whole = match[1] ?? "0";
  const fraction = match[2] ?? "";
  if (fraction.length > decimals) return undefined;
  return BigInt(whole) * 10n ** BigInt(decimals) + BigInt(fraction.padEnd(decimals, "0") || "0");
}

/**
 * Formats atomic units as a decimal string without trailing zeros.
 * @example formatUnits(1500000n, 6) // "1.5"
 */
export function formatUnits(atomic: bigint, decimals: number): string {
  const negative = atomic < 0n;
  const digits = (negative ? -atomic : atomic).toString().padStart(decimals + 1, "0");
  const whole = digits.slice(0, digits.length - decimals);
  const fraction = digits.slice(digits.length - decimals).replace(/0+$/, "");
  return `${negative ? "-" : ""}${whole}${fraction ? `.${fraction}` : ""}`;
}

/** USD amounts are held in micro-dollars: at most 6 decimals, as api.md allows. */
export const USD_DECIMALS = 6;

/**
 * The one dollar format of the API, for every USD amount it shows (balances' `usdValue` and
 * `totalUsdValue`, policy messages and their `details`): the exact decimal of the micro-dollars, never
 * rounded, with at least two decimals and no trailing zero beyond the second. Messages put a `$` before it.
 * @example formatUsd(45_000_000n) // "45.00"
 * @example formatUsd(299_817_040n) // "299.81704"
 * @example formatUsd(1n) // "0.000001"
 */
export function formatUsd(micros: bigint): string {
  const [whole, fraction = ""] = formatUnits(micros, USD_DECIMALS).split(".");
  return `${whole}.${fraction.padEnd(2, "0")}`;
}
