import { describe, expect, it } from "vitest";
import { creditsFor, decimalFromNumber, toAtomic, toDecimalAmount, usdToAtomicCap } from "./amounts.ts";
import { SvcValidationError } from "./errors.ts";

describe("decimalFromNumber: the shortest round-trip decimal form, never an exponent", () => {
  it.each([
    [0, "0"],
    [-0, "0"],
    [10, "10"],
    [2.5, "2.5"],
    [0.1, "0.1"],
    [0.3, "0.3"],
    [0.1 + 0.2, "0.30000000000000004"],
    [1e-7, "0.0000001"],
    [1.5e-7, "0.00000015"],
    [123e-20, "0.00000000000000000123"],
    [1e21, "1000000000000000000000"],
    [1.25e22, "12500000000000000000000"],
    [Number.MAX_SAFE_INTEGER, "9007199254740991"],
  ])("%s → %s", (value, text) => {
    expect(decimalFromNumber(value)).toBe(text);
    expect(Number(decimalFromNumber(value))).toBe(value === 0 ? 0 : value);
  });

  it.each([Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, -1, -0.5])(
    "%s throws",
    (value) => {
      expect(() => decimalFromNumber(value)).toThrow(SvcValidationError);
    },
  );
});

describe("toDecimalAmount", () => {
  it("accepts numbers and decimal strings within the token's decimals", () => {
    expect(toDecimalAmount(10, 6, "USDC")).toBe("10");
    expect(toDecimalAmount("12.345678", 6, "USDC")).toBe("12.345678");
    expect(toDecimalAmount(0.000001, 6, "USDC")).toBe("0.000001");
    expect(toDecimalAmount("0.000000000000000001", 18, "ETH")).toBe("0.000000000000000001");
  });

  it.each([
    ["0.0000001", /more decimals than USDC \(6\)/],
    [1e-7, /more decimals than USDC/],
    [0.1 + 0.2, /more decimals than USDC/],
    ["-1", /negative/],
    ["1e3", /not a decimal number/],
    ["01", /not a decimal number/],
    ["1.", /not a decimal number/],
    [".5", /not a decimal number/],
    ["", /not a decimal number/],
    ["+1", /not a decimal number/],
  ] as const)("%s is refused", (amount, message) => {
    expect(() => toDecimalAmount(amount, 6, "USDC")).toThrow(message);
  });

  it("refuses a value of another type", () => {
    expect(() => toDecimalAmount(10n as never, 6, "USDC")).toThrow(/number or a decimal string/);
  });
});

describe("atomic units, credits and caps: exact integer arithmetic", () => {
  it("toAtomic", () => {
    expect(toAtomic("1.5", 6)).toBe(1_500_000n);
    expect(toAtomic("0", 6)).toBe(0n);
    expect(toAtomic("123456789.123456789123456789", 18)).toBe(123456789123456789123456789n);
  });

  it("credits: whole cents rounded up, at least 1", () => {
    expect(creditsFor(1_500_000n, 6, "1")).toBe(150);
    expect(creditsFor(1n, 6, "1")).toBe(1);
    expect(creditsFor(0n, 6, "1")).toBe(1);
    expect(creditsFor(10_001n, 6, "1")).toBe(2);
    expect(creditsFor(10_000n, 6, "1")).toBe(1);
    expect(creditsFor(10n ** 15n, 18, "3000")).toBe(300); // 0.001 ETH at $3000
    expect(creditsFor(1n, 18, "3000")).toBe(1);
    expect(creditsFor(1_000_000_000n, 9, "150.25")).toBe(15025);
    expect(creditsFor(1n, 6, undefined)).toBeUndefined();
    expect(creditsFor(1n, 6, "abc")).toBeUndefined();
  });

  it("caps: the USD bound in atomic units, rounded down", () => {
    expect(usdToAtomicCap("10", 6, "1")).toBe(10_000_000n);
    expect(usdToAtomicCap("10.5", 6, "1")).toBe(10_500_000n);
    expect(usdToAtomicCap("10", 18, "3000")).toBe(3_333_333_333_333_333n);
    expect(usdToAtomicCap("3000", 18, "3000")).toBe(10n ** 18n);
    expect(usdToAtomicCap("1", 9, "150")).toBe(6_666_666n);
    expect(usdToAtomicCap("10", 6, undefined)).toBeUndefined();
    expect(usdToAtomicCap("10", 6, "0")).toBeUndefined();
  });
});
