/**
 * How the console writes amounts and times: amounts stay the service's decimal strings (formatted by
 * `Intl.NumberFormat`, which takes them exactly, never through a float), times in the viewer's zone.
 */

const amountFormat = new Intl.NumberFormat(undefined, {
  minimumFractionDigits: 2,
  maximumFractionDigits: 18,
});
/** Cents always, and every further digit the service keeps (6 decimals): a limit is shown as it holds. */
const usdFormat = new Intl.NumberFormat(undefined, {
  style: "currency",
  currency: "USD",
  minimumFractionDigits: 2,
  maximumFractionDigits: 6,
});

type Decimal = `${number}`;

/** `"1234.5", "USDC"` → `1,234.50 USDC` (in the viewer's locale). */
export function formatAmount(amount: string, token: string): string {
  return `${amountFormat.format(amount as Decimal)} ${token}`;
}

/**
 * `"12.3"` → `$12.30`, `"49.995"` → `$49.995`, `"0.001"` → `$0.001`; null (price unknown) → `—`. Never
 * rounded: a limit of $49.995 shown as $50.00 would tell the owner a spend it refuses is allowed.
 */
export function formatUsd(amount: string | null | undefined): string {
  if (amount === null || amount === undefined) return "—";
  return usdFormat.format(amount as Decimal);
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

/**
 * Where a spend goes, in one line: an x402 resource by its whole host (the rest shortened: the host is what
 * an agent cannot fake), anything else as a shortened address (its whole value in the title and the copy
 * button, and in full where a spend is approved: {@link groupedAddress}).
 */
export function payeeLabel(resource: string | null | undefined, to: string): string {
  if (resource) {
    try {
      const url = new URL(resource);
      return `${url.host}${shorten(`${url.pathname}${url.search}`, 12)}`;
    } catch {
      // Not a URL the browser reads: shown like an address.
      return shorten(resource, 10);
    }
  }
  return shorten(to, 10);
}

/**
 * An address in full, in groups of four (`0x1234 5678 9abc …`), to compare character by character: a
 * look-alike address shares its first and last characters with the one it imitates.
 */
export function groupedAddress(address: string): string {
  const prefix = address.startsWith("0x") ? "0x" : "";
  const groups = address.slice(prefix.length).match(/.{1,4}/g) ?? [];
  return `${prefix}${groups.join(" ")}`;
}
