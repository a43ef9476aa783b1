import { describe, expect, it } from "vitest";
import type { TokenInfo } from "../chains/types.ts";
import { type SpendFacts, unpricedToken, withRecipientAccountRent } from "./rules.ts";

const USDC: TokenInfo = {
  symbol: "USDC",
  address: "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v",
  decimals: 6,
  usdPrice: "1",
};
const SOL: TokenInfo = { symbol: "SOL", address: null, decimals: 9 };
const spend: SpendFacts = {
  walletId: "wal_1",
  type: "send",
  chain: "solana",
  token: USDC,
  amount: 10_000n,
  from: "9xE3ybyXcsU2UseXxQojoBTgsCkD6xPrv1CsgH17j63M",
  to: "7yUHXNMTZLNs816vnFxozUwHnrvh5kodk98ohPf2GJUs",
  usdMicros: 10_000n,
};

describe("unpricedToken: what a refusal names when a spend has no USD value", () => {
  it("names SOL when the USDC send is priced but the rent it gives its recipient is not", () => {
    const counted = withRecipientAccountRent(spend, SOL, 2_039_280n);
    expect(counted.usdMicros).toBeUndefined();
    expect(unpricedToken(counted)).toBe(SOL);
  });

  it("names the spend's own token when that is what has no price", () => {
    const unpriced = {
      ...spend,
      token: { symbol: "BONK", address: USDC.address, decimals: 5 },
      usdMicros: undefined,
    };
    expect(unpricedToken(unpriced).symbol).toBe("BONK");
    expect(
      unpricedToken(withRecipientAccountRent(unpriced, { ...SOL, usdPrice: "150" }, 2_039_280n)).symbol,
    ).toBe("BONK");
  });
});
