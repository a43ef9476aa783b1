import { inspect } from "node:util";
import { address } from "@solana/kit";
import { describe, expect, it } from "vitest";
import type { ChainConfig } from "../chains/types.ts";
import { AppError } from "../internal/errors.ts";
import { getPaymentSettlement, getRecentBlockhash } from "./chain-reads.ts";

// Nothing listens on port 9; the path holds what a provider's API key looks like.
const SECRET = "k3yS3cretPr0vider";
const unreachable: ChainConfig = {
  name: "solana",
  kind: "solana",
  network: "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp",
  testnet: false,
  rpcUrl: `http://127.0.0.1:9/v2/${SECRET}`,
  nativeToken: { symbol: "SOL", address: null, decimals: 9 },
  tokens: [],
};

async function failure(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error("expected the read to fail");
    },
    (error: unknown) => error,
  );
}

describe("x402's Solana reads, from a node that does not answer", () => {
  it("are 502 chain_unavailable, without the URL's key (they were a TypeError: a 500)", async () => {
    const reads = [
      () => getRecentBlockhash(unreachable),
      () =>
        getPaymentSettlement(unreachable, {
          kind: "solana",
          payerSignature: "5".repeat(88),
          sourceTokenAccount: address("E2DYNoae5S1dao9FU9szVNJyw3gwANvgcQ8V7j4ZYqu"),
          lastValidBlockHeight: 1000n,
        }),
    ];
    for (const read of reads) {
      const error = await failure(read());
      expect(error).toBeInstanceOf(AppError);
      expect(error).toMatchObject({ status: 502, reason: "chain_unavailable" });
      expect(inspect(error, { depth: 10 })).not.toContain(SECRET);
    }
  });
});
