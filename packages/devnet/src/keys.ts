/**
 * Keys of the local chains' treasuries.
 *
 * LOCAL DEVELOPMENT KEYS ONLY. They are public (the EVM one is anvil's first well-known dev account, the
 * Solana ones are derived from fixed, published seeds) and must never hold value on a public network.
 * Anyone can spend from them there.
 */

/** Chain id of the local anvil node: anvil's default, used by no public network. */
export const DEVNET_EVM_CHAIN_ID = 31337;

/** Anvil's first dev account (`test test … junk` mnemonic, index 0): the EVM treasury and token admin. */
export const EVM_TREASURY_PRIVATE_KEY =
  "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80" as const;

/** Address of {@link EVM_TREASURY_PRIVATE_KEY}. */
export const EVM_TREASURY_ADDRESS = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266" as const;

/** Fixed 32-byte Ed25519 seed from a label, so local addresses stay the same across runs. */
function devSeed(label: string): Uint8Array {
  const bytes = new Uint8Array(32);
  const text = new TextEncoder().encode(`svc-devnet:${label}`);
  bytes.set(text.subarray(0, 32));
  return bytes;
}

/** Ed25519 seed of the Solana treasury (holds SOL and is the USDC mint authority). */
export const SOLANA_TREASURY_SEED: Uint8Array = devSeed("treasury");

/** Ed25519 seed of the USDC-like mint account, so the mint address is stable across runs. */
export const SOLANA_USDC_MINT_SEED: Uint8Array = devSeed("usdc-mint");

/** Ed25519 seed of the faucet behind `requestAirdrop`. */
export const SOLANA_FAUCET_SEED: Uint8Array = devSeed("faucet");
