import { isAddress as isSolanaAddress } from "@solana/kit";
import { checksumAddress } from "viem";
import type { ChainKind } from "../chains/registry.ts";

const EVM_HEX = /^0x[0-9a-fA-F]{40}$/;
const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/i;
const IPV4 = /^(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?:\.(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;

/**
 * A hostname a whitelist may name for x402: `localhost`, an IPv4 address, or a dotted name whose last label
 * is not all digits. A single label is refused on purpose: a mistyped address (`0xabc`, a truncated base58
 * string) is a well-formed label, and a whitelist entry that silently matches nothing is worse than a 400.
 */
function isHostname(entry: string): boolean {
  if (entry.toLowerCase() === "localhost" || IPV4.test(entry)) return true;
  const labels = entry.split(".");
  return (
    entry.length <= 253 &&
    labels.length >= 2 &&
    labels.every((label) => LABEL.test(label)) &&
    !/^\d+$/.test(labels[labels.length - 1] ?? "")
  );
}

/** An EVM address: 0x and 40 hex digits, all one case, or mixed case matching its EIP-55 checksum. */
function evmAddressProblem(entry: string): string | undefined {
  if (!EVM_HEX.test(entry)) return "is not an EVM address (0x followed by 40 hex digits)";
  const hex = entry.slice(2);
  if (hex === hex.toLowerCase() || hex === hex.toUpperCase()) return undefined;
  return checksumAddress(entry as `0x${string}`) === entry
    ? undefined
    : "has mixed case that does not match its EIP-55 checksum; write it as checksummed or all lowercase";
}

/**
 * Why a whitelist entry cannot be one, or undefined when it can: an address of a chain kind this
 * deployment serves (EVM, Solana), or a hostname (for x402).
 * @example whitelistEntryProblem("0x12", new Set(["evm"])) // '"0x12" is not an EVM address (0x followed by 40 hex digits)'
 */
export function whitelistEntryProblem(entry: string, served: ReadonlySet<ChainKind>): string | undefined {
  const quoted = JSON.stringify(entry.length > 100 ? `${entry.slice(0, 100)}…` : entry);
  if (/^0x/i.test(entry)) {
    if (!served.has("evm"))
      return `${quoted} looks like an EVM address, but this deployment serves no EVM chain`;
    const problem = evmAddressProblem(entry);
    return problem ? `${quoted} ${problem}` : undefined;
  }
  if (isSolanaAddress(entry)) {
    return served.has("solana")
      ? undefined
      : `${quoted} is a Solana address, but this deployment serves no Solana chain`;
  }
  if (isHostname(entry)) return undefined;
  const expected = [
    ...(served.has("evm") ? ["an EVM address"] : []),
    ...(served.has("solana") ? ["a Solana address"] : []),
    "a hostname",
  ];
  return `${quoted} is not ${expected.slice(0, -1).join(", ")}${expected.length > 1 ? " or " : ""}${expected.at(-1)}`;
}

/**
 * The hostname of an x402 resource that a whitelist entry may admit its payment by: one reached over https,
 * or on this machine. A plain-http answer can be rewritten on the way (its payee with it), so over http a
 * public host vouches for nothing and only the payee's address on the whitelist admits the payment.
 * @example vouchedHostname(new URL("https://api.example.com/weather")) // "api.example.com"
 */
export function vouchedHostname(url: URL): string | undefined {
  const host = url.hostname.toLowerCase();
  const local =
    host === "localhost" || host.endsWith(".localhost") || /^127\./.test(host) || host === "[::1]";
  return url.protocol === "https:" || local ? url.hostname : undefined;
}
