import { describe, expect, it } from "vitest";
import { DestinationGuard } from "./destinations.ts";

describe("DestinationGuard.checkAddress", () => {
  const guard = new DestinationGuard();

  it.each([
    ["127.0.0.1", "loopback"],
    ["127.255.255.254", "loopback"],
    ["::1", "loopback"],
    ["10.0.0.1", "private"],
    ["10.255.255.255", "private"],
    ["172.16.0.1", "private"],
    ["172.31.255.255", "private"],
    ["192.168.1.1", "private"],
    ["100.64.0.1", "private"],
    ["fc00::1", "private"],
    ["fd12:3456::1", "private"],
    ["169.254.169.254", "link-local"],
    ["169.254.0.1", "link-local"],
    ["fe80::1", "link-local"],
    ["0.0.0.0", "reserved"],
    ["::", "reserved"],
    ["224.0.0.1", "reserved"],
    ["255.255.255.255", "reserved"],
    ["2001:db8::1", "reserved"],
    // IPv4-mapped, NAT64 and 6to4 addresses lead to the IPv4 address inside them.
    ["::ffff:127.0.0.1", "loopback"],
    ["::ffff:7f00:1", "loopback"],
    ["::ffff:169.254.169.254", "link-local"],
    ["0:0:0:0:0:ffff:a9fe:a9fe", "link-local"],
    ["64:ff9b::a9fe:a9fe", "link-local"],
    ["64:ff9b::10.0.0.1", "private"],
    ["2002:7f00:1::1", "loopback"],
    ["2002:a9fe:a9fe::", "link-local"],
    ["[::1]", "loopback"],
    // Outside global unicast, and not carrying an IPv4 address checked as such: SIIT, local-use NAT64
    // (which a network may translate to its private addresses), SRv6, unassigned space.
    ["::ffff:0:7f00:1", "reserved"],
    ["::ffff:0:a9fe:a9fe", "reserved"],
    ["64:ff9b:1::a00:1", "private"],
    ["5f00::1", "reserved"],
    ["4000::1", "reserved"],
    ["e000::1", "reserved"],
  ])("refuses %s (%s)", (address, kind) => {
    expect(guard.checkAddress(address)).toMatchObject({ allowed: false, kind });
  });

  it.each([
    "93.184.216.34",
    "8.8.8.8",
    "1.1.1.1",
    "172.32.0.1",
    "172.15.255.255",
    "192.169.0.1",
    "2606:4700:4700::1111",
    "::ffff:8.8.8.8",
    "64:ff9b::808:808",
  ])("allows the public address %s", (address) => {
    expect(guard.checkAddress(address)).toEqual({ allowed: true, exempt: false });
  });

  it("refuses what is not an address", () => {
    expect(guard.checkAddress("example.com")).toMatchObject({ allowed: false });
    expect(guard.checkAddress("fe80::1%eth0")).toMatchObject({ allowed: false });
  });
});

describe("DestinationGuard exemptions", () => {
  it("exempts the addresses inside an allowed CIDR range, and only those", () => {
    const guard = new DestinationGuard(["10.1.0.0/16", "169.254.169.254"]);
    expect(guard.checkAddress("10.1.2.3")).toEqual({ allowed: true, exempt: true });
    expect(guard.checkAddress("10.2.0.1")).toMatchObject({ allowed: false, kind: "private" });
    expect(guard.checkAddress("169.254.169.254")).toEqual({ allowed: true, exempt: true });
    expect(guard.checkAddress("169.254.169.253")).toMatchObject({ allowed: false });
  });

  it("exempts an IPv4-mapped address by its IPv4 range", () => {
    const guard = new DestinationGuard(["127.0.0.0/8", "::1/128"]);
    expect(guard.checkAddress("::ffff:127.0.0.1")).toEqual({ allowed: true, exempt: true });
    expect(guard.checkAddress("::1")).toEqual({ allowed: true, exempt: true });
    expect(guard.checkAddress("fe80::1")).toMatchObject({ allowed: false });
  });

  it("exempts hostnames by exact name, case and trailing dot aside", () => {
    const guard = new DestinationGuard(["localhost", "Internal.Example"]);
    expect(guard.isExemptHost("localhost")).toBe(true);
    expect(guard.isExemptHost("LOCALHOST.")).toBe(true);
    expect(guard.isExemptHost("internal.example")).toBe(true);
    expect(guard.isExemptHost("evil.internal.example")).toBe(false);
    expect(guard.isExemptHost("localhost.evil.example")).toBe(false);
  });
});
