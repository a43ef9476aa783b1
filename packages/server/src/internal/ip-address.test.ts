import { describe, expect, it } from "vitest";
import { addressLimitKey, parseAddress } from "./ip-address.ts";

describe("parseAddress", () => {
  it("reads compressed IPv6 and embedded IPv4 to the same integer", () => {
    expect(parseAddress("::ffff:127.0.0.1")).toEqual(parseAddress("0:0:0:0:0:ffff:7f00:1"));
    expect(parseAddress("fe80::")).toEqual({ family: 6, value: 0xfe80n << 112n });
    expect(parseAddress("1.2.3.4")).toEqual({ family: 4, value: 0x01020304n });
  });
});

describe("addressLimitKey", () => {
  it("counts IPv6 clients by their /64, IPv4 ones (mapped ones too) by their address", () => {
    expect(addressLimitKey("2001:db8:1:2::7")).toBe("2001:db8:1:2::/64");
    expect(addressLimitKey("2001:0db8:0001:0002:ffff:ffff:ffff:ffff")).toBe("2001:db8:1:2::/64");
    expect(addressLimitKey("2001:db8:1:3::7")).toBe("2001:db8:1:3::/64");
    expect(addressLimitKey("::1")).toBe("0.0.0.1");
    expect(addressLimitKey("2001:db8:1:2::1%eth0")).toBe("2001:db8:1:2::/64");
    expect(addressLimitKey("203.0.113.7")).toBe("203.0.113.7");
    expect(addressLimitKey("not an address")).toBe("not an address");
  });

  it("counts an IPv4 client arriving in an IPv6 form by its IPv4 address: mapped, translated, compatible, NAT64", () => {
    for (const form of [
      "::ffff:203.0.113.7",
      "::ffff:0:203.0.113.7",
      "::203.0.113.7",
      "64:ff9b::203.0.113.7",
      "64:ff9b::cb00:7107",
    ]) {
      expect(addressLimitKey(form), form).toBe("203.0.113.7");
    }
    expect(addressLimitKey("64:ff9b::203.0.113.8")).toBe("203.0.113.8");
  });
});
