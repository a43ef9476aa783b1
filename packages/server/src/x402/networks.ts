/**
 * x402 network names. v2 names networks by CAIP-2 id, as the chain registry does; v1 by names from a closed
 * list, mapped here to their CAIP-2 ids so that both versions match the registry the same way.
 */

const SOLANA_MAINNET = "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp";
const SOLANA_DEVNET = "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1";
const SOLANA_TESTNET = "solana:4uhcVJyU9pJkvQyS88uRDiswHXSCkY3z";

/** EVM chain ids of v1 names (the reference packages' lists: `x402` 1.2 and `@x402/evm`'s v1). */
const V1_EVM_CHAIN_IDS: Readonly<Record<string, number>> = {
  ethereum: 1,
  sepolia: 11155111,
  base: 8453,
  "base-sepolia": 84532,
  polygon: 137,
  "polygon-amoy": 80002,
  avalanche: 43114,
  "avalanche-fuji": 43113,
  abstract: 2741,
  "abstract-testnet": 11124,
  iotex: 4689,
  sei: 1329,
  "sei-testnet": 1328,
  peaq: 3338,
  story: 1514,
  educhain: 41923,
  "skale-base-sepolia": 324705682,
  megaeth: 4326,
  monad: 143,
  stable: 988,
  "stable-testnet": 2201,
  celo: 42220,
  flare: 14,
};

const V1_SOLANA: Readonly<Record<string, string>> = {
  solana: SOLANA_MAINNET,
  "solana-devnet": SOLANA_DEVNET,
  "solana-testnet": SOLANA_TESTNET,
};

/** CAIP-2 syntax: `namespace:reference`. */
const CAIP2 = /^[-a-z0-9]{3,8}:[-_a-zA-Z0-9]{1,32}$/;

/**
 * The CAIP-2 id of a network as a challenge names it: a v1 name from the closed list, or a CAIP-2 id as is.
 * Undefined for anything else.
 *
 * @example
 * toCaip2("base-sepolia");   // "eip155:84532"
 * toCaip2("solana-devnet");  // "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1"
 * toCaip2("eip155:31337");   // "eip155:31337"
 */
export function toCaip2(network: string): string | undefined {
  if (Object.hasOwn(V1_EVM_CHAIN_IDS, network)) return `eip155:${V1_EVM_CHAIN_IDS[network]}`;
  if (Object.hasOwn(V1_SOLANA, network)) return V1_SOLANA[network];
  return CAIP2.test(network) ? network : undefined;
}

/**
 * The EVM chain id of a CAIP-2 `eip155:<id>` network; undefined for other networks.
 * @example evmChainId("eip155:8453") // 8453
 */
export function evmChainId(caip2: string): number | undefined {
  const match = /^eip155:([1-9]\d{0,15})$/.exec(caip2);
  if (!match?.[1]) return undefined;
  const id = Number(match[1]);
  return Number.isSafeInteger(id) ? id : undefined;
}
