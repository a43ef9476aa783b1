import type { PolicyInput } from "@svc/sdk";
import { usage } from "./failure.ts";

/**
 * A whole number option within bounds, for commander's option parsers.
 * @example
 * new Option("--limit <n>").argParser(wholeNumber("--limit", 1, 100));
 */
export function wholeNumber(name: string, min: number, max: number): (value: string) => number {
  return (value) => {
    if (!/^\d+$/.test(value) || Number(value) < min || Number(value) > max) {
      throw usage(`${name} must be a whole number from ${min} to ${max}, not ${JSON.stringify(value)}`);
    }
    return Number(value);
  };
}

/**
 * A comma-separated list, empty items dropped.
 * @example
 * list("base, solana"); // ["base", "solana"]
 */
export function list(value: string): string[] {
  return value
    .split(",")
    .map((item) => item.trim())
    .filter((item) => item !== "");
}

const USD = /^(0|[1-9]\d*)(\.\d{1,6})?$/;

/**
 * A USD bound: a decimal amount (`10`, `2.50`, at most 6 decimals), or `none` (no bound: sent as null by
 * {@link policyFromOptions}). `none` stays a string here: commander turns an option parser's null into "".
 * @example
 * usdBound("--max-per-tx")("10"); // "10"
 * usdBound("--daily-limit")("None"); // "none"
 */
export function usdBound(name: string): (value: string) => string {
  return (value) => {
    const trimmed = value.trim().replace(/^\$/, "");
    if (trimmed.toLowerCase() === "none") return "none";
    if (!USD.test(trimmed)) {
      throw usage(`${name} must be a USD amount like 10 or 2.50 (at most 6 decimals), or none`);
    }
    return trimmed;
  };
}

/** The policy options `wallets create` and `policy set` share, as commander parses them. */
export interface PolicyOptions {
  /** A USD amount, or `none` (see {@link usdBound}). */
  maxPerTx?: string;
  dailyLimit?: string;
  alertAbove?: string;
  approvalAbove?: string;
  whitelist?: string;
  requireSpendAuthorization?: boolean;
}

/**
 * The policy fields given on the command line (undefined when none was).
 * @example
 * policyFromOptions({ maxPerTx: "10", dailyLimit: "none", whitelist: "none" }); // { maxPerTx: "10", dailyLimit: null, whitelist: [] }
 */
export function policyFromOptions(options: PolicyOptions): PolicyInput | undefined {
  const policy: PolicyInput = {};
  const bound = (value: string) => (value === "none" ? null : value);
  if (options.maxPerTx !== undefined) policy.maxPerTx = bound(options.maxPerTx);
  if (options.dailyLimit !== undefined) policy.dailyLimit = bound(options.dailyLimit);
  if (options.alertAbove !== undefined) policy.alertAbove = bound(options.alertAbove);
  if (options.approvalAbove !== undefined) policy.approvalAbove = bound(options.approvalAbove);
  if (options.whitelist !== undefined) {
    const entries = options.whitelist.trim().toLowerCase() === "none" ? [] : list(options.whitelist);
    // Only `none` lifts the whitelist: an empty value (an unset variable, say) is a mistake, not "anyone".
    if (entries.length === 0 && options.whitelist.trim().toLowerCase() !== "none") {
      throw usage("--whitelist must list at least one recipient, or be none for any recipient");
    }
    policy.whitelist = entries;
  }
  if (options.requireSpendAuthorization !== undefined) {
    policy.requireSpendAuthorization = options.requireSpendAuthorization;
  }
  return Object.keys(policy).length === 0 ? undefined : policy;
}
