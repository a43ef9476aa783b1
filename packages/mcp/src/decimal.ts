const DECIMAL = /^(0|[1-9]\d*)(?:\.(\d+))?$/;

/**
 * A non-negative decimal string as an exact fraction `value / scale`; undefined when malformed.
 * @example
 * parseDecimal("150.25"); // { value: 15025n, scale: 100n }
 */
export function parseDecimal(text: string): { value: bigint; scale: bigint } | undefined {
  const match = DECIMAL.exec(text);
  if (!match) return undefined;
  const fraction = match[2] ?? "";
  return { value: BigInt(`${match[1]}${fraction}`), scale: 10n ** BigInt(fraction.length) };
}

/** The product of two exact fractions. */
export function multiply(
  a: { value: bigint; scale: bigint },
  b: { value: bigint; scale: bigint },
): { value: bigint; scale: bigint } {
  return { value: a.value * b.value, scale: a.scale * b.scale };
}

/** An exact fraction written in dollars and cents, rounded up (what a confirmation shows). */
export function usdText(amount: { value: bigint; scale: bigint }): string {
  const cents = (amount.value * 100n + amount.scale - 1n) / amount.scale;
  return `$${cents / 100n}.${(cents % 100n).toString().padStart(2, "0")}`;
}
