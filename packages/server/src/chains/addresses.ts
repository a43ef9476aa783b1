/** Facts about addresses that hold on every chain of a kind. */
import type { ChainKind } from "./registry.ts";
import type { ChainConfig } from "./types.ts";

/** Whether two addresses are one: EVM's compare without case (a checksum is only case), Solana's exactly. */
export function sameAddress(kind: ChainKind, a: string, b: string): boolean {
  return kind === "evm" ? a.toLowerCase() === b.toLowerCase() : a === b;
}

/**
 * What `address` is, when it is no recipient: whatever the chain lets through to it can never be spent again.
 * EVM's zero address, Solana's all-zero key (the System Program), the contract (EVM) or mint (Solana) of a
 * token the chain serves (USDC's contract refuses transfers to itself: the sender loses the fee), or of a
 * token another served chain of its kind serves (an address nobody holds a key for here). Undefined for any
 * other address.
 * @example lostAt(base, "0x0000000000000000000000000000000000000000") // "the zero address"
 * @example lostAt(base, base.tokens[0].address)                    // "the USDC contract"
 */
export function lostAt(chain: ChainConfig, address: string): string | undefined {
  if (chain.kind === "evm" && /^0x0{40}$/i.test(address)) return "the zero address";
  if (chain.kind === "solana" && address === "11111111111111111111111111111111")
    return "the zero address (the System Program)";
  const contract = chain.kind === "evm" ? "contract" : "mint";
  const token = chain.tokens.find((t) => t.address !== null && sameAddress(chain.kind, t.address, address));
  if (token) return `the ${token.symbol} ${contract}`;
  const other = chain.tokensElsewhere?.find((t) => sameAddress(chain.kind, t.address, address));
  return other && `the ${other.symbol} ${contract} on ${other.chain}`;
}
