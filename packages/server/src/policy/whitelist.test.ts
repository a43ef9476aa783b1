import { describe, expect, it } from "vitest";
import { vouchedHostname, whitelistEntryProblem } from "./whitelist.ts";

const both = new Set(["evm", "solana"] as const);
const CHECKSUMMED = "0x000000000000000000000000000000000000dEaD";
const SOLANA = "11111111111111111111111111111112";

describe("whitelistEntryProblem", () => {
  it("accepts addresses of the served kinds, in either case for EVM, and hostnames", () => {
    for (const entry of [
      CHECKSUMMED,
      CHECKSUMMED.toLowerCase(),
      `0x${CHECKSUMMED.slice(2).toUpperCase()}`,
      SOLANA,
      "9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin",
      "api.example.com",
      "Weather.Example.COM",
      "localhost",
      "127.0.0.1",
    ]) {
      expect(whitelistEntryProblem(entry, both), entry).toBeUndefined();
    }
  });

  it("names the entry and says what is wrong with it", () => {
    expect(whitelistEntryProblem("0x12", both)).toBe(
      '"0x12" is not an EVM address (0x followed by 40 hex digits)',
    );
    expect(whitelistEntryProblem("0x000000000000000000000000000000000000DeaD", both)).toBe(
      '"0x000000000000000000000000000000000000DeaD" has mixed case that does not match its EIP-55 checksum; write it as checksummed or all lowercase',
    );
    // A truncated base58 address decodes to fewer than 32 bytes.
    expect(whitelistEntryProblem("9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrp", both)).toBe(
      '"9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrp" is not an EVM address, a Solana address or a hostname',
    );
    expect(whitelistEntryProblem("example", new Set(["evm"]))).toBe(
      '"example" is not an EVM address or a hostname',
    );
    for (const entry of [
      "not an address",
      "example",
      "http://example.com",
      "example.com:443",
      "1.2.3.4.5",
      "-a.com",
    ]) {
      expect(whitelistEntryProblem(entry, both), entry).toMatch(
        /is not an EVM address, a Solana address or a hostname$/,
      );
    }
  });

  it("refuses an address of a kind the deployment does not serve", () => {
    expect(whitelistEntryProblem(SOLANA, new Set(["evm"]))).toBe(
      `"${SOLANA}" is a Solana address, but this deployment serves no Solana chain`,
    );
    expect(whitelistEntryProblem(CHECKSUMMED, new Set(["solana"]))).toBe(
      `"${CHECKSUMMED}" looks like an EVM address, but this deployment serves no EVM chain`,
    );
  });
});

describe("vouchedHostname", () => {
  it("lets a whitelisted hostname admit a payment only over https, or on this machine", () => {
    expect(vouchedHostname(new URL("https://api.example.com/weather?q=1"))).toBe("api.example.com");
    expect(vouchedHostname(new URL("http://api.example.com/weather"))).toBeUndefined();
    expect(vouchedHostname(new URL("http://10.0.0.5:8080/data"))).toBeUndefined();
    for (const local of ["http://localhost:4021/x", "http://127.0.0.1:4021/x", "http://[::1]:4021/x"])
      expect(vouchedHostname(new URL(local))).toBe(new URL(local).hostname);
  });
});
