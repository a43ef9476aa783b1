import { describe, expect, it } from "vitest";
import { uiTokenAmount } from "./token.ts";

describe("uiTokenAmount", () => {
  it("formats atomic amounts the way a cluster does", () => {
    expect(uiTokenAmount(2_250_000n, 6)).toEqual({
      amount: "2250000",
      decimals: 6,
      uiAmount: 2.25,
      uiAmountString: "2.25",
    });
    expect(uiTokenAmount(0n, 6)).toEqual({ amount: "0", decimals: 6, uiAmount: 0, uiAmountString: "0" });
    expect(uiTokenAmount(1n, 6).uiAmountString).toBe("0.000001");
    expect(uiTokenAmount(7n, 0).uiAmountString).toBe("7");
  });
});
