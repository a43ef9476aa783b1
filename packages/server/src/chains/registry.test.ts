import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../internal/config.ts";
import { ChainRegistry, resolveChains } from "./registry.ts";

describe("chain registry profiles", () => {
  it("serves base-sepolia and solana-devnet on the testnet profile, with Circle's test USDC", async () => {
    const chains = await resolveChains(loadConfig({ SVC_NETWORK_PROFILE: "testnet" }).network);
    expect(chains.map((c) => [c.name, c.kind, c.network, c.testnet])).toEqual([
      ["base-sepolia", "evm", "eip155:84532", true],
      ["solana-devnet", "solana", "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1", true],
    ]);
    expect(chains[0]?.tokens).toEqual([
      {
        symbol: "USDC",
        address: "0x036CbD53842c5426634e7929541eC2318f3dCF7e",
        decimals: 6,
        usdPrice: "1",
        eip712: { name: "USDC", version: "2" },
      },
    ]);
    expect(chains[1]?.tokens[0]?.address).toBe("4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU");
    // No price configured off the devnet: the native coins have none (never a guess).
    expect(chains.map((c) => c.nativeToken)).toEqual([
      { symbol: "ETH", address: null, decimals: 18 },
      { symbol: "SOL", address: null, decimals: 9 },
    ]);
  });

  it("serves base, ethereum, arbitrum and solana on the mainnet profile, RPC URLs and prices from the environment", async () => {
    const config = loadConfig({
      SVC_NETWORK_PROFILE: "mainnet",
      SVC_RPC_BASE: "https://base.example/rpc/key",
      SVC_RPC_SOLANA: "https://solana.example/",
      SVC_PRICE_ETH_USD: "3120.55",
    });
    const chains = await resolveChains(config.network);
    expect(
      chains.map((c) => [c.name, c.network, c.nativeToken.symbol, c.tokens[0]?.address, c.testnet]),
    ).toEqual([
      ["base", "eip155:8453", "ETH", "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913", false],
      ["ethereum", "eip155:1", "ETH", "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48", false],
      ["arbitrum", "eip155:42161", "ETH", "0xaf88d065e77c8cC2239327C5EDb3A432268e5831", false],
      [
        "solana",
        "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp",
        "SOL",
        "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v",
        false,
      ],
    ]);
    expect(chains.map((c) => c.rpcUrl)).toEqual([
      "https://base.example/rpc/key",
      "https://ethereum-rpc.publicnode.com",
      "https://arb1.arbitrum.io/rpc",
      "https://solana.example/",
    ]);
    expect(chains[0]?.nativeToken.usdPrice).toBe("3120.55");
    expect(chains[3]?.nativeToken.usdPrice).toBeUndefined();
  });

  it("validates chain names against the served ones", async () => {
    const registry = new ChainRegistry(
      await resolveChains(loadConfig({ SVC_NETWORK_PROFILE: "testnet" }).network),
    );
    expect(registry.names()).toEqual(["base-sepolia", "solana-devnet"]);
    expect(registry.get("base-sepolia")?.kind).toBe("evm");
    expect(registry.get("base")).toBeUndefined();
    expect(registry.client("base-sepolia")).toBeUndefined();
  });

  it("defaults to the devnet profile with fixed local prices, and wants both RPC URLs and tokens of an external devnet", () => {
    const network = loadConfig({}).network;
    expect(network.profile).toBe("devnet");
    expect(network.rpcUrls).toEqual({});
    expect(network.usdPrices).toEqual({ ETH: "3000", SOL: "150" });
    expect(() => loadConfig({ SVC_RPC_BASE: "http://127.0.0.1:8545" })).toThrow(ConfigError);
    expect(() => loadConfig({ SVC_RPC_BASE: "http://127.0.0.1:8545" })).toThrow(
      "Invalid configuration: SVC_USDC_BASE: required with SVC_RPC_BASE on the devnet profile; " +
        "SVC_RPC_SOLANA: required when another devnet RPC URL is set",
    );
    expect(() => loadConfig({ SVC_NETWORK_PROFILE: "moon" })).toThrow(/SVC_NETWORK_PROFILE/);
    expect(() => loadConfig({ SVC_PRICE_SOL_USD: "1.1234567" })).toThrow(/SVC_PRICE_SOL_USD/);
  });

  it("reads a faucet key in solana-keygen format without echoing it", () => {
    const bytes = Array.from({ length: 64 }, (_, i) => i);
    const config = loadConfig({ SVC_FAUCET_SOLANA_SECRET_KEY: JSON.stringify(bytes) });
    expect([...(config.network.faucet.solanaSeed ?? [])]).toEqual(bytes.slice(0, 32));
    const bad = JSON.stringify(bytes.slice(0, 10));
    let message = "";
    try {
      loadConfig({ SVC_FAUCET_SOLANA_SECRET_KEY: bad });
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toContain("SVC_FAUCET_SOLANA_SECRET_KEY");
    expect(message).not.toContain(bad);
  });
});
