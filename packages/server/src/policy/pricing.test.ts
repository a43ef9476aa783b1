import { describe, expect, it } from "vitest";
import { usdMicros } from "./pricing.ts";

const usdc = { symbol: "USDC", address: "x", decimals: 6, usdPrice: "1" };
const eth = { symbol: "ETH", address: null, decimals: 18, usdPrice: "3000.5" };

describe("usdMicros", () => {
  it("values stablecoins 1:1 and native coins at their price, exactly", () => {
    expect(usdMicros(usdc, 1_000_000n)).toBe(1_000_000n);
    expect(usdMicros(eth, 10n ** 18n)).toBe(3_000_500_000n);
    expect(usdMicros(eth, 5n * 10n ** 17n)).toBe(1_500_250_000n);
  });
  it("rounds a fraction of a micro-dollar up, so a limit is never passed by rounding", () => {
    expect(usdMicros(eth, 1n)).toBe(1n);
  });
  it("has no value for a token without a price", () => {
    expect(usdMicros({ symbol: "SOL", address: null, decimals: 9 }, 1n)).toBeUndefined();
  });
});
