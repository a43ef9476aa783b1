import { describe, expect, it } from "vitest";
import { isHostAllowed } from "./host-check.ts";

describe("isHostAllowed", () => {
  it("serves a host given as an address, any port, in any spelling a browser resolves to one", () => {
    for (const host of ["127.0.0.1:8080", "127.0.0.1", "[::1]:8080", "[::1]", "10.1.2.3:443", "127.1:8080"])
      expect(isHostAllowed(host, []), host).toBe(true);
  });

  it("serves localhost and its subdomains, which browsers never look up", () => {
    for (const host of ["localhost:8080", "LOCALHOST", "console.localhost:8080", "localhost."])
      expect(isHostAllowed(host, []), host).toBe(true);
  });

  it("refuses any other name unless the operator listed it", () => {
    for (const host of ["attacker.example:8080", "localhost.attacker.example", "127.0.0.1.nip.io:8080"])
      expect(isHostAllowed(host, []), host).toBe(false);
    expect(isHostAllowed("Wallet.Example.com:443", ["wallet.example.com"])).toBe(true);
    expect(isHostAllowed("wallet.example.com.", ["wallet.example.com"])).toBe(true);
    expect(isHostAllowed("api.wallet.example.com", ["wallet.example.com"])).toBe(false);
    expect(isHostAllowed("attacker.example", "any")).toBe(true);
    // A container's name, and a unicode name as browsers send it (punycode), as the config lists them.
    expect(isHostAllowed("my_svc:8080", ["my_svc"])).toBe(true);
    expect(isHostAllowed("xn--bcher-kva.example", ["xn--bcher-kva.example"])).toBe(true);
  });

  it("refuses a host that is not a host", () => {
    for (const host of [
      "a b",
      "[::1",
      "x/y@z",
      "@",
      "evil@127.0.0.1",
      "127.0.0.1/evil",
      "127.0.0.1#x",
      "127.0.0.1?x",
    ])
      expect(isHostAllowed(host, []), host).toBe(false);
  });

  it("serves a request naming no host (HTTP/1.0), which no browser sends", () => {
    expect(isHostAllowed("", [])).toBe(true);
  });
});
