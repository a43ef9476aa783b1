/**
 * Network ids the reference packages know. `@x402/svm` accepts only the three public Solana ids, and v1
 * servers name networks from a closed list, so the local chains are presented under public ids: the
 * devnet's Solana RPC answers for Solana devnet, and an anvil started with chain id 84532 for Base Sepolia.
 */

/** CAIP-2 id of Solana devnet: the id the local Solana chain is served under (see the module note). */
export const SOLANA_DEVNET_NETWORK = "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1";

/** The v1 name of Solana devnet. */
export const SOLANA_DEVNET_V1_NAME = "solana-devnet";

/** v1 names of EVM chains by chain id, for the chains a local anvil may be started as. */
export const EVM_V1_NAMES: Readonly<Record<number, string>> = {
  84532: "base-sepolia",
  8453: "base",
};

/** CAIP-2 id of an EVM chain. */
export function evmNetwork(chainId: number): `eip155:${number}` {
  return `eip155:${chainId}`;
}
