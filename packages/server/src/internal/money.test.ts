import { describe, expect, it } from "vitest";
import { formatUnits, formatUsd, parseUnitsStrict } from "./money.ts";

describe("parseUnitsStrict", () => {
  it("parses whole and fractional amounts exactly", () => {
    expect(parseUnitsStrict("1.5", 6)).toBe(1_500_000n);
    expect(parseUnitsStrict("0.000001", 6)).toBe(1n);
    expect(parseUnitsStrict("123456789012345678901234567890", 18)).toBe(
      123456789012345678901234567890n * 10n ** 18n,
    );
  });
  it("refuses more decimals than the token has, signs, exponents and junk", () => {
    for (const bad of [
      "0.0000001",
      "-1",
      "1e6",
      "01",
      ".5",
      "5.",
      "",
      " 1",
      "0x10",
      "1,5",
      "Infinity",
      "NaN",
    ]) {
      expect(parseUnitsStrict(bad, 6), bad).toBeUndefined();
    }
  });
});

describe("formatUnits", () => {
  it("round-trips with parseUnitsStrict and drops trailing zeros", () => {
    for (const value of ["0", "1", "1.5", "0.000001", "1000000.25"]) {
      const atomic = parseUnitsStrict(value, 6);
      expect(atomic).toBeDefined();
      expect(formatUnits(atomic ?? 0n, 6)).toBe(value);
    }
    expect(formatUnits(10n ** 18n, 18)).toBe("1");
  });
  it("shows dollars with at least two decimals", () => {
    expect(formatUsd(45_000_000n)).toBe("45.00");
    expect(formatUsd(1_234_567n)).toBe("1.234567");
    expect(formatUsd(299_817_040n)).toBe("299.81704");
    expect(formatUsd(20_000_000n)).toBe("20.00");
    expect(formatUsd(1n)).toBe("0.000001");
    expect(formatUsd(0n)).toBe("0.00");
  });
});
