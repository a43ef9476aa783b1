/**
 * How the console writes amounts and times: amounts stay the service's decimal strings (formatted by
 * `Intl.NumberFormat`, which takes them exactly, never through a float), times in the viewer's zone.
 */

const amountFormat = new Intl.NumberFormat(undefined, {
  minimumFractionDigits: 2,
  maximumFractionDigits: 18,
});
const usdFormat = new Intl.NumberFormat(undefined, { style: "currency", currency: "USD" });
/** Below a cent (an x402 call's price), the digits that make it up. */
const smallUsdFormat = new Intl.NumberFormat(undefined, {
  style: "currency",
  currency: "USD",
  maximumFractionDigits: 6,
});

type Decimal = `${number}`;

/** `"1234.5", "USDC"` → `1,234.50 USDC` (in the viewer's locale). */
export function formatAmount(amount: string, token: string): string {
  return `${amountFormat.format(amount as Decimal)} ${token}`;
}

/** `"12.3"` → `$12.30`, `"3089.800724"` → `$3,089.80`, `"0.001"` → `$0.001`; null (price unknown) → `—`. */
export function formatUsd(amount: string | null | undefined): string {
  if (amount === null || amount === undefined) return "—";
  const small = /^0\.00/.test(amount) && /[1-9]/.test(amount);
  return (small ? smallUsdFormat : usdFormat).format(amount as Decimal);
}

const timeFormat = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });

/** An ISO time in the viewer's zone, e.g. `22 Nov 2026, 14:03:12`. */
export function formatTime(iso: string): string {
  return timeFormat.format(new Date(iso));
}

/** `2026-11-22T…` → `3 min ago` / `in 2 h` relative to `now`. */
export function formatRelative(iso: string, now: number = Date.now()): string {
  const seconds = Math.round((Date.parse(iso) - now) / 1000);
  const abs = Math.abs(seconds);
  const [value, unit] =
    abs < 60
      ? [seconds, "second"]
      : abs < 3600
        ? [Math.round(seconds / 60), "minute"]
        : abs < 86_400
          ? [Math.round(seconds / 3600), "hour"]
          : [Math.round(seconds / 86_400), "day"];
  return relativeFormat.format(value, unit as Intl.RelativeTimeFormatUnit);
}
const relativeFormat = new Intl.RelativeTimeFormat(undefined, { numeric: "auto", style: "short" });

/** `0x1234567890abcdef…` → `0x1234…cdef`. */
export function shorten(value: string, keep = 6): string {
  return value.length <= keep * 2 + 1 ? value : `${value.slice(0, keep)}…${value.slice(-4)}`;
}
