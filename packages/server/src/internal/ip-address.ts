/** IP addresses as integers, for comparing ranges and grouping clients. */
import { isIP } from "node:net";

/** An address parsed to its integer, with its family. */
export interface ParsedAddress {
  family: 4 | 6;
  value: bigint;
}

/**
 * Parses an IPv4 address (dotted quad) or an IPv6 address (with `::`, an embedded dotted quad, optionally in
 * brackets) to its integer. Anything else, including a zone id, gives undefined.
 */
export function parseAddress(text: string): ParsedAddress | undefined {
  const address = text.startsWith("[") && text.endsWith("]") ? text.slice(1, -1) : text;
  const family = isIP(address);
  if (family === 4) return { family: 4, value: ipv4Value(address) };
  if (family !== 6 || address.includes("%")) return undefined;
  let head = address;
  let tail32: bigint | undefined;
  const lastColon = address.lastIndexOf(":");
  if (address.slice(lastColon + 1).includes(".")) {
    tail32 = ipv4Value(address.slice(lastColon + 1));
    head = `${address.slice(0, lastColon + 1)}0:0`;
  }
  const [left = "", right] = head.split("::");
  const leftGroups = left === "" ? [] : left.split(":");
  const rightGroups = right === undefined || right === "" ? [] : right.split(":");
  const missing = 8 - leftGroups.length - rightGroups.length;
  const groups =
    right === undefined ? leftGroups : [...leftGroups, ...Array(missing).fill("0"), ...rightGroups];
  let value = 0n;
  for (const group of groups) value = (value << 16n) | BigInt(Number.parseInt(group, 16));
  if (tail32 !== undefined) value = (value & ~0xffffffffn) | tail32;
  return { family: 6, value };
}

function ipv4Value(address: string): bigint {
  return address.split(".").reduce((value, octet) => (value << 8n) | BigInt(Number(octet)), 0n);
}

/**
 * The /96 prefixes whose last 32 bits are an IPv4 address: IPv4-mapped (`::ffff:0:0/96`), IPv4-translated
 * (`::ffff:0:0:0/96`), IPv4-compatible (`::/96`) and the NAT64 well-known prefix (`64:ff9b::/96`).
 */
const IPV4_CARRYING_PREFIXES = [0xffffn, 0xffff0000n, 0n, 0x64ff9bn << 64n];

/**
 * What a per-address limit counts a client by: an IPv4 address itself, also when it comes inside an IPv6
 * form (mapped, translated or NAT64: behind such a gateway every IPv4 client would otherwise share one
 * budget); any other IPv6 address by its /64. One host is commonly given a whole /64, so counting single
 * IPv6 addresses would let it spread its requests over 2^64 budgets (a host given a /48 still has 65,536).
 * A zone suffix (`%eth0`) is ignored; anything unparsable counts as itself.
 * @example addressLimitKey("2001:db8:1:2::7") // "2001:db8:1:2::/64"
 */
export function addressLimitKey(address: string): string {
  // Every request asks: an IPv4 address (no colon) is its own key, with nothing to parse.
  if (!address.includes(":")) return address;
  const parsed = parseAddress(address.split("%")[0] ?? address);
  if (parsed?.family !== 6) return address;
  if (IPV4_CARRYING_PREFIXES.includes(parsed.value >> 32n)) {
    return [24n, 16n, 8n, 0n].map((shift) => (parsed.value >> shift) & 0xffn).join(".");
  }
  const groups = [112n, 96n, 80n, 64n].map((shift) => ((parsed.value >> shift) & 0xffffn).toString(16));
  return `${groups.join(":")}::/64`;
}
