import { describe, expect, it } from "vitest";
import { multiply, parseDecimal, usdText } from "./decimal.ts";

describe("exact decimals for the confirmation threshold", () => {
  it("parses decimal strings exactly and refuses anything else", () => {
    expect(parseDecimal("150.25")).toEqual({ value: 15025n, scale: 100n });
    expect(parseDecimal("5")).toEqual({ value: 5n, scale: 1n });
    for (const bad of ["", "-1", "1e3", "01", "1.", ".5", "abc"])
      expect(parseDecimal(bad), bad).toBeUndefined();
  });

  it("values a spend exactly and shows it in cents rounded up", () => {
    const value = multiply(parseDecimal("0.000001") as never, parseDecimal("3000") as never);
    expect(usdText(value)).toBe("$0.01");
    expect(usdText(multiply(parseDecimal("3") as never, parseDecimal("1") as never))).toBe("$3.00");
    expect(usdText(parseDecimal("2.001") as never)).toBe("$2.01");
  });
});
