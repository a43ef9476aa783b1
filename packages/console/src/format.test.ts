import { describe, expect, it } from "vitest";
import { formatUsd, groupedAddress, payeeLabel } from "./format.ts";
import { match } from "./router.tsx";

describe("what the console shows of a payee", () => {
  it("an approval's payee in full, in groups of four: a look-alike differs where it differs", () => {
    const genuine = "0x1234567800000000000000000000000000005678";
    const lookAlike = "0x12345678deadbeefdeadbeefdeadbeefdead5678";
    expect(groupedAddress(genuine)).toBe("0x1234 5678 0000 0000 0000 0000 0000 0000 0000 5678");
    expect(groupedAddress(lookAlike)).not.toBe(groupedAddress(genuine));
    expect(groupedAddress(lookAlike).replaceAll(" ", "")).toBe(lookAlike);
    const solana = "9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin";
    expect(groupedAddress(solana).replaceAll(" ", "")).toBe(solana);
  });

  it("an x402 resource by its whole host, whatever its path ends with", () => {
    expect(payeeLabel("http://127.0.0.1:4021/weather/evm", "0xabc")).toBe("127.0.0.1:4021/weather/evm");
    expect(payeeLabel("https://evil.example.net/a/very/long/path/that/ends/like/chat", "0xabc")).toBe(
      "evil.example.net/a/very/long…chat",
    );
    expect(payeeLabel(undefined, "0x1234567800000000000000000000000000005678")).toBe("0x12345678…5678");
  });
});

describe("USD amounts", () => {
  it("are never rounded: a limit shows every digit the service keeps", () => {
    expect(formatUsd("49.995")).toBe("$49.995");
    expect(formatUsd("5.004")).toBe("$5.004");
    expect(formatUsd("12.3")).toBe("$12.30");
    expect(formatUsd("0.015")).toBe("$0.015");
    expect(formatUsd("3089.800724")).toBe("$3,089.800724");
    expect(formatUsd(null)).toBe("—");
  });
});

describe("the router", () => {
  it("matches nothing for a malformed escape in a link, rather than failing the page", () => {
    expect(match("/wallets/:id", "/wallets/%E0%A4%A")).toBeNull();
    expect(match("/wallets/:id", "/wallets/wal_%41")).toEqual({ id: "wal_A" });
  });
});
