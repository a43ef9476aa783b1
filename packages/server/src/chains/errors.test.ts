import { inspect } from "node:util";
import { describe, expect, it } from "vitest";
import { AppError } from "../internal/errors.ts";
import { chainCall, isUnreachable } from "./errors.ts";
import { EvmChain } from "./evm.ts";
import { SolanaChain } from "./solana.ts";
import type { ChainConfig } from "./types.ts";

// Nothing listens on port 9; the path holds what a provider's API key looks like.
const SECRET = "k3yS3cretPr0vider";
const unreachable = (kind: "evm" | "solana"): ChainConfig => ({
  name: kind === "evm" ? "base" : "solana",
  kind,
  network: kind === "evm" ? "eip155:8453" : "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp",
  rpcUrl: `http://127.0.0.1:9/v2/${SECRET}`,
  nativeToken: { symbol: kind === "evm" ? "ETH" : "SOL", address: null, decimals: kind === "evm" ? 18 : 9 },
  tokens: [],
  testnet: false,
});

describe("chain errors", () => {
  for (const kind of ["evm", "solana"] as const) {
    it(`reports an unreachable ${kind} endpoint as chain_unavailable without the RPC URL's key`, async () => {
      const config = unreachable(kind);
      const client = kind === "evm" ? new EvmChain(config) : new SolanaChain(config);
      const owner =
        kind === "evm"
          ? "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
          : "E2DYNoae5S1dao9FU9szVNJyw3gwANvgcQ8V7j4ZYqu";
      const raw = await client.getBalance(owner, config.nativeToken).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(isUnreachable(raw)).toBe(true);
      expect(inspect(raw, { depth: 10 })).not.toContain(SECRET);
      const wrapped = await chainCall(config.name, () => client.getBalance(owner, config.nativeToken)).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(wrapped).toBeInstanceOf(AppError);
      expect(wrapped).toMatchObject({ status: 502, reason: "chain_unavailable" });
      expect(inspect(wrapped, { depth: 10 })).not.toContain(SECRET);
    });
  }
});
