import { type ChainName, ConfigError, type NetworkConfig, type NetworkProfile } from "../internal/config.ts";
import { sameAddress } from "./addresses.ts";
import { discoverEvmNetwork, EvmChain } from "./evm.ts";
import { discoverSolanaNetwork, SolanaChain } from "./solana.ts";
import type { ChainClient, ChainConfig, TokenInfo } from "./types.ts";

/** The kinds of chain the service holds keys for. One EVM address serves every EVM chain. */
export type ChainKind = "evm" | "solana";

/** What a profile says about one chain before the environment fills in the rest. */
interface ChainTemplate {
  name: ChainName;
  kind: ChainKind;
  /** CAIP-2 id; absent on the devnet profile, where it is read from the local chain itself. */
  network?: string;
  /** Public endpoint used when `SVC_RPC_<NAME>` is not set; absent on the devnet profile. */
  defaultRpcUrl?: string;
  /** USDC contract or mint; absent on the devnet profile (it comes from `SVC_USDC_<NAME>` or the devnet). */
  usdc?: string;
  /** EIP-712 domain of the EVM USDC (read from the token itself on the devnet profile). */
  eip712?: { name: string; version: string };
  testnet: boolean;
  /** See {@link ChainConfig.scanDepth}. */
  scanDepth: number;
}

const USDC_DECIMALS = 6;
const USD_COIN_2 = { name: "USD Coin", version: "2" };

/**
 * The chains behind each profile. Names are stable API words; what stands behind them is configuration.
 * USDC addresses are Circle's (x402.md); RPC defaults are the networks' public endpoints (rate limited:
 * set `SVC_RPC_<NAME>` in production).
 */
export const PROFILES: Readonly<Record<NetworkProfile, readonly ChainTemplate[]>> = {
  devnet: [
    { name: "base", kind: "evm", testnet: true, scanDepth: 0 },
    { name: "solana", kind: "solana", testnet: true, scanDepth: 0 },
  ],
  testnet: [
    {
      name: "base-sepolia",
      kind: "evm",
      network: "eip155:84532",
      defaultRpcUrl: "https://sepolia.base.org",
      usdc: "0x036CbD53842c5426634e7929541eC2318f3dCF7e",
      eip712: { name: "USDC", version: "2" },
      testnet: true,
      scanDepth: 2,
    },
    {
      name: "solana-devnet",
      kind: "solana",
      network: "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1",
      defaultRpcUrl: "https://api.devnet.solana.com",
      usdc: "4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU",
      testnet: true,
      scanDepth: 0,
    },
  ],
  mainnet: [
    {
      name: "base",
      kind: "evm",
      network: "eip155:8453",
      defaultRpcUrl: "https://mainnet.base.org",
      usdc: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
      eip712: USD_COIN_2,
      testnet: false,
      scanDepth: 3,
    },
    {
      name: "ethereum",
      kind: "evm",
      network: "eip155:1",
      defaultRpcUrl: "https://ethereum-rpc.publicnode.com",
      usdc: "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48",
      eip712: USD_COIN_2,
      testnet: false,
      scanDepth: 3,
    },
    {
      name: "arbitrum",
      kind: "evm",
      network: "eip155:42161",
      defaultRpcUrl: "https://arb1.arbitrum.io/rpc",
      usdc: "0xaf88d065e77c8cC2239327C5EDb3A432268e5831",
      eip712: USD_COIN_2,
      testnet: false,
      scanDepth: 3,
    },
    {
      name: "solana",
      kind: "solana",
      network: "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp",
      defaultRpcUrl: "https://api.mainnet-beta.solana.com",
      usdc: "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v",
      testnet: false,
      scanDepth: 0,
    },
  ],
};

/** Networks of the public profiles: a devnet claiming one of these is refused (it would sign for it). */
const PUBLIC_NETWORKS = new Set(
  [...PROFILES.testnet, ...PROFILES.mainnet].flatMap((t) => (t.network ? [t.network] : [])),
);

/** The chains this deployment serves, by their stable API names, with a chain-layer client for each. */
export class ChainRegistry {
  readonly #chains: Map<string, ChainConfig>;
  readonly #clients = new Map<string, ChainClient>();
  readonly #createClient: ((config: ChainConfig) => ChainClient) | undefined;

  /**
   * @param createClient builds the client of a chain on first use; without it {@link client} has none
   * (a registry of configurations only, as unit tests use).
   */
  constructor(chains: readonly ChainConfig[], createClient?: (config: ChainConfig) => ChainClient) {
    this.#chains = new Map(chains.map((chain) => [chain.name, chain]));
    this.#createClient = createClient;
  }

  /** @example registry.get("base")?.kind // "evm" */
  get(name: string): ChainConfig | undefined {
    return this.#chains.get(name);
  }

  /** The served chain names, in profile order. */
  names(): string[] {
    return [...this.#chains.keys()];
  }

  /** Every served chain's configuration, in profile order. */
  list(): ChainConfig[] {
    return [...this.#chains.values()];
  }

  /**
   * The chain layer for a served chain name; undefined for a name this deployment does not serve.
   * @example await registry.client("base")?.getBalance(address, registry.get("base")!.nativeToken)
   */
  client(name: string): ChainClient | undefined {
    const config = this.#chains.get(name);
    if (!config || !this.#createClient) return undefined;
    let client = this.#clients.get(name);
    if (!client) {
      client = this.#createClient(config);
      this.#clients.set(name, client);
    }
    return client;
  }

  /** Closes the clients made so far. */
  async close(): Promise<void> {
    await Promise.all([...this.#clients.values()].map((client) => client.close?.()));
    this.#clients.clear();
  }
}

/**
 * Builds the chain configurations of the configured profile. On the devnet profile the network ids and
 * token facts are read from the local chains themselves (their RPC URLs and USDC addresses must be set,
 * by the environment or by the start-up wiring that started them); a devnet answering with a public
 * network's id is refused.
 * @example
 * const chains = await resolveChains(config.network); // [{ name: "base", network: "eip155:31337", … }, …]
 */
export async function resolveChains(network: NetworkConfig): Promise<ChainConfig[]> {
  const chains = await Promise.all(
    PROFILES[network.profile].map((template) => resolveChain(template, network)),
  );
  return chains.map((chain) => ({
    ...chain,
    tokensElsewhere: chains
      .filter((other) => other.kind === chain.kind && other.name !== chain.name)
      .flatMap((other) =>
        other.tokens.flatMap(({ symbol, address }) =>
          address === null ||
          chain.tokens.some((own) => own.address !== null && sameAddress(chain.kind, own.address, address))
            ? []
            : [{ chain: other.name, symbol, address }],
        ),
      ),
  }));
}

async function resolveChain(template: ChainTemplate, network: NetworkConfig): Promise<ChainConfig> {
  const rpcUrl = network.rpcUrls[template.name] ?? template.defaultRpcUrl;
  const usdc = network.usdcAddresses[template.name] ?? template.usdc;
  if (!rpcUrl || !usdc) {
    throw new ConfigError(
      `chain ${template.name}: no RPC URL or USDC address configured for the devnet profile`,
    );
  }
  let caip2 = template.network;
  let eip712 = template.eip712;
  if (caip2 === undefined) {
    if (template.kind === "evm") {
      const found = await discoverEvmNetwork(template.name, rpcUrl, usdc);
      caip2 = found.network;
      eip712 = found.eip712;
    } else {
      caip2 = await discoverSolanaNetwork(template.name, rpcUrl);
    }
    if (PUBLIC_NETWORKS.has(caip2)) {
      throw new ConfigError(
        `chain ${template.name}: the devnet at ${rpcUrl} reports public network ${caip2}`,
      );
    }
  }
  const nativeSymbol = template.kind === "evm" ? "ETH" : "SOL";
  const price = network.usdPrices[nativeSymbol];
  const nativeToken: TokenInfo = {
    symbol: nativeSymbol,
    address: null,
    decimals: template.kind === "evm" ? 18 : 9,
    ...(price !== undefined ? { usdPrice: price } : {}),
  };
  const usdcToken: TokenInfo = {
    symbol: "USDC",
    address: usdc,
    decimals: USDC_DECIMALS,
    usdPrice: "1",
    ...(template.kind === "evm" && eip712 ? { eip712 } : {}),
  };
  return {
    name: template.name,
    kind: template.kind,
    network: caip2,
    rpcUrl,
    nativeToken,
    tokens: [usdcToken],
    testnet: template.testnet,
    scanDepth: template.scanDepth,
  };
}

/** The chain-layer client of a chain configuration. */
export function createChainClient(config: ChainConfig): ChainClient {
  return config.kind === "evm" ? new EvmChain(config) : new SolanaChain(config);
}

/**
 * The registry of the configured profile, with a client per chain.
 * @example const chains = await createChainRegistry(config.network);
 */
export async function createChainRegistry(network: NetworkConfig): Promise<ChainRegistry> {
  return new ChainRegistry(await resolveChains(network), createChainClient);
}
