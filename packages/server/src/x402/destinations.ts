/**
 * Which network addresses an outbound request may reach. The service fetches URLs its callers name (x402
 * resources), so without this a caller could make it reach what only it can reach: loopback services, the
 * private network, the cloud metadata endpoint (169.254.169.254).
 */
import { isIP } from "node:net";
import { networkInterfaces } from "node:os";
import { type ParsedAddress, parseAddress } from "../internal/ip-address.ts";

/** Why an address is refused. */
export type RefusedKind = "loopback" | "private" | "link-local" | "reserved";

interface Range {
  family: 4 | 6;
  base: bigint;
  prefix: number;
  text: string;
}

interface RefusedRange extends Range {
  kind: RefusedKind;
}

/** Addresses no outbound request may reach unless exempt (IANA special-purpose registries). */
const REFUSED: readonly RefusedRange[] = [
  refused("0.0.0.0/8", "reserved"),
  refused("10.0.0.0/8", "private"),
  refused("100.64.0.0/10", "private"),
  refused("127.0.0.0/8", "loopback"),
  refused("169.254.0.0/16", "link-local"),
  refused("172.16.0.0/12", "private"),
  refused("192.0.0.0/24", "reserved"),
  refused("192.0.2.0/24", "reserved"),
  refused("192.88.99.0/24", "reserved"),
  refused("192.168.0.0/16", "private"),
  refused("198.18.0.0/15", "reserved"),
  refused("198.51.100.0/24", "reserved"),
  refused("203.0.113.0/24", "reserved"),
  refused("224.0.0.0/4", "reserved"),
  refused("240.0.0.0/4", "reserved"),
  refused("::1/128", "loopback"),
  // Unspecified and IPv4-compatible (deprecated) addresses.
  refused("::/96", "reserved"),
  refused("100::/64", "reserved"),
  // IETF protocol assignments, among them Teredo (2001::/32), which tunnels to an IPv4 address.
  refused("2001::/23", "reserved"),
  refused("2001:db8::/32", "reserved"),
  refused("fc00::/7", "private"),
  refused("fe80::/10", "link-local"),
  refused("fec0::/10", "private"),
  refused("ff00::/8", "reserved"),
  // Local-use NAT64 (RFC 8215): translated into IPv4 addresses of the local network's choosing.
  refused("64:ff9b:1::/48", "private"),
];

/**
 * Public IPv6 addresses are global unicast; outside it, only the ranges that carry an IPv4 address (checked
 * by that address) may be reached. Everything else there (SIIT `::ffff:0:0:0/96`, SRv6 `5f00::/16`,
 * unassigned space) is refused, whatever a network might route it to.
 */
const IPV6_GLOBAL_UNICAST = parseRange("2000::/3");

/** IPv6 ranges that carry an IPv4 address, which is what the connection finally reaches. */
const IPV4_MAPPED = parseRange("::ffff:0:0/96");
const NAT64 = parseRange("64:ff9b::/96");
const SIX_TO_FOUR = parseRange("2002::/16");

/** The verdict on one address. */
export type AddressVerdict =
  | { allowed: true; exempt: boolean }
  | { allowed: false; kind: RefusedKind; range: string };

/**
 * Decides which destinations an outbound request may reach: public addresses always; private, loopback,
 * link-local and reserved ones only when an `allow` entry (CIDR range, address or hostname) exempts them.
 *
 * @example
 * ```ts
 * const guard = new DestinationGuard(["127.0.0.0/8", "localhost"]);
 * guard.checkAddress("169.254.169.254"); // { allowed: false, kind: "link-local", range: "169.254.0.0/16" }
 * guard.checkAddress("127.0.0.1");       // { allowed: true, exempt: true }
 * guard.isExemptHost("localhost");       // true
 * ```
 */
export class DestinationGuard {
  readonly #allowedRanges: readonly Range[];
  readonly #allowedHosts: ReadonlySet<string>;

  /** @param allow CIDR ranges, addresses and hostnames, as `SVC_OUTBOUND_ALLOW` lists them. */
  constructor(allow: readonly string[] = []) {
    const ranges: Range[] = [];
    const hosts = new Set<string>();
    for (const entry of allow) {
      const text = entry.trim().toLowerCase();
      const [address = ""] = text.split("/");
      if (isIP(address) !== 0) ranges.push(parseRange(text.includes("/") ? text : withFullPrefix(text)));
      else if (text !== "") hosts.add(text.replace(/\.$/, ""));
    }
    this.#allowedRanges = ranges;
    this.#allowedHosts = hosts;
  }

  /** True when `hostname` is exempt by name: requests to it are not checked by address. */
  isExemptHost(hostname: string): boolean {
    return this.#allowedHosts.has(hostname.toLowerCase().replace(/\.$/, ""));
  }

  /** The verdict on an IPv4 or IPv6 address (as a string); a string that is not an address is refused. */
  checkAddress(address: string): AddressVerdict {
    const parsed = parseAddress(address);
    if (!parsed) return { allowed: false, kind: "reserved", range: "not an IP address" };
    const candidates = [parsed, ...embeddedIpv4(parsed)];
    if (candidates.some((candidate) => this.#allowedRanges.some((range) => contains(range, candidate)))) {
      return { allowed: true, exempt: true };
    }
    for (const candidate of candidates) {
      const hit = REFUSED.find((range) => contains(range, candidate));
      if (hit) return { allowed: false, kind: hit.kind, range: hit.text };
    }
    if (parsed.family === 6 && candidates.length === 1 && !contains(IPV6_GLOBAL_UNICAST, parsed)) {
      return { allowed: false, kind: "reserved", range: "outside 2000::/3 (global unicast)" };
    }
    return { allowed: true, exempt: false };
  }
}

/** Addresses that reach this machine itself whatever its interfaces: loopback, and the unspecified address. */
const THIS_MACHINE: readonly Range[] = [
  parseRange("127.0.0.0/8"),
  parseRange("0.0.0.0/32"),
  parseRange("::1/128"),
  parseRange("::/128"),
];

/**
 * Whether two IP addresses lead to the same host: the same address (an IPv6 address that carries an IPv4
 * one, mapped, NAT64 or 6to4, is that IPv4 address, as the guard takes it: {@link embeddedIpv4}), or both this machine (loopback, unspecified, or the address of one of its network interfaces, read
 * now), where a server listening on all of them is reached through any. Anything not an address matches
 * nothing.
 * @example sameHost("::ffff:127.0.0.1", "127.0.0.1") // true
 * @example sameHost("64:ff9b::127.0.0.1", "127.0.0.1") // true
 * @example sameHost("0.0.0.0", "127.0.0.1")          // true
 * @example sameHost("10.0.0.5", "10.0.0.6")          // false
 */
export function sameHost(a: string, b: string): boolean {
  const [left, right] = [a, b].map((address) => {
    const parsed = parseAddress(address);
    return parsed && (embeddedIpv4(parsed)[0] ?? parsed);
  });
  if (!left || !right) return false;
  if (left.family === right.family && left.value === right.value) return true;
  const interfaces = Object.values(networkInterfaces())
    .flat()
    .flatMap((found) => {
      const parsed = found && parseAddress(found.address);
      return parsed ? [parsed] : [];
    });
  const local = (address: ParsedAddress) =>
    THIS_MACHINE.some((range) => contains(range, address)) ||
    interfaces.some((own) => own.family === address.family && own.value === address.value);
  return local(left) && local(right);
}

/** The IPv4 address an IPv6 address leads to (mapped, NAT64, 6to4), if it carries one. */
function embeddedIpv4(address: ParsedAddress): ParsedAddress[] {
  if (address.family !== 6) return [];
  if (contains(IPV4_MAPPED, address) || contains(NAT64, address)) {
    return [{ family: 4, value: address.value & 0xffffffffn }];
  }
  if (contains(SIX_TO_FOUR, address)) return [{ family: 4, value: (address.value >> 80n) & 0xffffffffn }];
  return [];
}

function contains(range: Range, address: ParsedAddress): boolean {
  if (range.family !== address.family) return false;
  const bits = range.family === 4 ? 32 : 128;
  const shift = BigInt(bits - range.prefix);
  return address.value >> shift === range.base >> shift;
}

function withFullPrefix(address: string): string {
  return `${address}/${isIP(address) === 4 ? 32 : 128}`;
}

function refused(text: string, kind: RefusedKind): RefusedRange {
  return { ...parseRange(text), kind };
}

function parseRange(text: string): Range {
  const [address = "", prefixText] = text.split("/");
  const parsed = parseAddress(address);
  const prefix = Number(prefixText);
  if (!parsed || !Number.isInteger(prefix) || prefix < 0 || prefix > (parsed.family === 4 ? 32 : 128)) {
    throw new Error(`not a CIDR range: ${text}`);
  }
  return { family: parsed.family, base: parsed.value, prefix, text };
}
