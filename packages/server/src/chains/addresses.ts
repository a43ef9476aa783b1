/** Facts about addresses that hold on every chain of a kind. */
import type { ChainKind } from "./registry.ts";
import type { ChainConfig } from "./types.ts";

/** Whether two addresses are one: EVM's compare without case (a checksum is only case), Solana's exactly. */
export function sameAddress(kind: ChainKind, a: string, b: string): boolean {
  return kind === "evm" ? a.toLowerCase() === b.toLowerCase() : a === b;
}

/** The Solana loaders: they own the programs and the programs' data accounts. */
export const SOLANA_LOADERS: ReadonlySet<string> = new Set([
  "NativeLoader1111111111111111111111111111111",
  "BPFLoader1111111111111111111111111111111111",
  "BPFLoader2111111111111111111111111111111111",
  "BPFLoaderUpgradeab1e11111111111111111111111",
  "LoaderV411111111111111111111111111111111111",
]);

/** The owner of a Solana cluster's sysvars (clock, rent, …). */
export const SOLANA_SYSVAR_OWNER = "Sysvar1111111111111111111111111111111111111";

/**
 * Addresses of every Solana cluster that nobody can sign for, whether or not the cluster stores an account
 * there (the instructions sysvar never has one, and a program not deployed on this cluster has none yet): the
 * sysvars, the runtime's loaders and native programs, and the SPL programs a transfer touches.
 */
const SOLANA_RUNTIME: ReadonlySet<string> = new Set([
  SOLANA_SYSVAR_OWNER,
  "SysvarC1ock11111111111111111111111111111111",
  "SysvarRent111111111111111111111111111111111",
  "SysvarEpochSchedu1e111111111111111111111111",
  "SysvarFees111111111111111111111111111111111",
  "SysvarRecentB1ockHashes11111111111111111111",
  "SysvarS1otHashes111111111111111111111111111",
  "SysvarS1otHistory11111111111111111111111111",
  "SysvarStakeHistory1111111111111111111111111",
  "Sysvar1nstructions1111111111111111111111111",
  "SysvarEpochRewards1111111111111111111111111",
  "SysvarLastRestartS1ot1111111111111111111111",
  ...SOLANA_LOADERS,
  "Config1111111111111111111111111111111111111",
  "Stake11111111111111111111111111111111111111",
  "Vote111111111111111111111111111111111111111",
  "ComputeBudget111111111111111111111111111111",
  "AddressLookupTab1e1111111111111111111111111",
  "Ed25519SigVerify111111111111111111111111111",
  "KeccakSecp256k11111111111111111111111111111",
  "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA",
  "TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb",
  "ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL",
  "MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr",
  "Memo1UhkJRfHyvLMcVucJwxXeuD728EqVDDwQDxFMNo",
]);

/** The mints of wrapped SOL, SPL Token's and Token-2022's, which a cluster may keep no account at (a local one). */
const SOLANA_NATIVE_MINTS: ReadonlySet<string> = new Set([
  "So11111111111111111111111111111111111111112",
  "9pan9bMn5HatX4EJdBwg9VgCa7Uz5HL8N1m5D3NdXejP",
]);

/**
 * What `address` is, when it is no recipient: whatever the chain lets through to it can never be spent again.
 * EVM's zero address and the addresses up to 0x1ff (precompiles: 0x01 on, and 0x100 on some L2s); Solana's
 * all-zero key (the System Program), runtime addresses ({@link SOLANA_RUNTIME}) and wrapped SOL's mints; the
 * contract (EVM) or mint (Solana) of a token the chain serves (USDC's contract refuses transfers to itself: the
 * sender loses the fee), or of a token another served chain of its kind serves (an address nobody holds a key
 * for here). Undefined for any other address.
 * @example lostAt(base, "0x0000000000000000000000000000000000000000") // "the zero address"
 * @example lostAt(base, base.tokens[0].address)                    // "the USDC contract"
 */
export function lostAt(chain: ChainConfig, address: string): string | undefined {
  if (chain.kind === "evm" && /^0x0{40}$/i.test(address)) return "the zero address";
  if (chain.kind === "evm" && /^0x0{37}[01][0-9a-f]{2}$/i.test(address))
    return "the address of a precompiled contract (nobody holds a key for it)";
  if (chain.kind === "solana" && SOLANA_NATIVE_MINTS.has(address)) return "the wrapped SOL mint";
  if (chain.kind === "solana" && address === "11111111111111111111111111111111")
    return "the zero address (the System Program)";
  if (chain.kind === "solana" && SOLANA_RUNTIME.has(address))
    return "a program or sysvar of the Solana runtime";
  const contract = chain.kind === "evm" ? "contract" : "mint";
  const token = chain.tokens.find((t) => t.address !== null && sameAddress(chain.kind, t.address, address));
  if (token) return `the ${token.symbol} ${contract}`;
  const other = chain.tokensElsewhere?.find((t) => sameAddress(chain.kind, t.address, address));
  return other && `the ${other.symbol} ${contract} on ${other.chain}`;
}
