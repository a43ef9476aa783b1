import { describe, expect, it } from "vitest";
import { SvcError } from "./errors.ts";
import type { Chain } from "./types.ts";
import { chooseRequirement, parseX402Challenge, responseFromPaidFetch } from "./x402.ts";

const EVM = {
  scheme: "exact",
  network: "eip155:84532",
  amount: "10000",
  asset: "0x036CbD53842c5426634e7929541eC2318f3dCF7e",
  payTo: "0x000000000000000000000000000000000000dEaD",
  maxTimeoutSeconds: 60,
  extra: { name: "USDC", version: "2" },
};
/** Standard padded base64 of UTF-8 JSON, as x402 headers carry it. */
const header = (value: unknown) => Buffer.from(JSON.stringify(value), "utf8").toString("base64");

describe("parseX402Challenge", () => {
  it("reads a v2 challenge from PAYMENT-REQUIRED (the body is not relied on), even with non-ASCII text", () => {
    const headers = new Headers({
      "payment-required": header({ x402Version: 2, error: "paiement requis — 0,01 €", accepts: [EVM] }),
    });
    expect(parseX402Challenge(headers, "{}")).toEqual({
      version: 2,
      error: "paiement requis — 0,01 €",
      requirements: [{ network: "eip155:84532", amount: 10000n, asset: EVM.asset, payTo: EVM.payTo }],
    });
  });

  it("reads a v1 challenge from the body, mapping v1 network names to CAIP-2 and reading maxAmountRequired", () => {
    const body = JSON.stringify({
      x402Version: 1,
      error: "X-PAYMENT header is required",
      accepts: [
        { ...EVM, amount: undefined, network: "base-sepolia", maxAmountRequired: "20000", extra: null },
        { ...EVM, amount: undefined, network: "solana-devnet", maxAmountRequired: "5", payTo: "9xQe" },
      ],
    });
    expect(parseX402Challenge(new Headers(), body).requirements).toEqual([
      { network: "eip155:84532", amount: 20000n, asset: EVM.asset, payTo: EVM.payTo },
      { network: "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1", amount: 5n, asset: EVM.asset, payTo: "9xQe" },
    ]);
  });

  it("leaves out entries it cannot pay (other schemes, unknown networks, amounts that are not atomic strings)", () => {
    const accepts = [
      { ...EVM, scheme: "upto" },
      { ...EVM, network: "not a network" },
      { ...EVM, amount: 10000 },
      { ...EVM, amount: "0.01" },
      { ...EVM, payTo: "" },
      EVM,
    ];
    const { requirements } = parseX402Challenge(
      new Headers({ "payment-required": header({ x402Version: 2, accepts }) }),
      "",
    );
    expect(requirements).toHaveLength(1);
  });

  it("throws invalid_payment_challenge when there is no challenge to read", () => {
    for (const [headers, body] of [
      [new Headers(), "<html>Pay here</html>"],
      [new Headers(), JSON.stringify({ x402Version: 3, accepts: [] })],
      [new Headers({ "payment-required": "not base64!" }), ""],
      [new Headers({ "payment-required": header({ x402Version: 1, accepts: [] }) }), ""],
      [new Headers(), JSON.stringify({ x402Version: 1 })],
    ] as const) {
      const error = (() => {
        try {
          return parseX402Challenge(headers, body);
        } catch (e) {
          return e;
        }
      })();
      expect(error).toBeInstanceOf(SvcError);
      expect((error as SvcError).reason).toBe("invalid_payment_challenge");
    }
  });
});

describe("chooseRequirement", () => {
  const baseSepolia: Chain = {
    name: "base-sepolia",
    kind: "evm",
    network: "eip155:84532",
    nativeToken: { symbol: "ETH", decimals: 18 },
    tokens: [{ symbol: "USDC", address: EVM.asset, decimals: 6 }],
    testnet: true,
  };
  const offer = (payTo: string) => ({ network: EVM.network, amount: 10_000n, asset: EVM.asset, payTo });

  it("passes over payees the service refuses (the zero address, the token's own contract) for the next offer", () => {
    const good = offer(EVM.payTo);
    for (const payTo of [
      `0x${"0".repeat(40)}`,
      EVM.asset.toLowerCase(),
      EVM.asset.toUpperCase().replace("0X", "0x"),
    ]) {
      const challenge = { version: 2 as const, error: undefined, requirements: [offer(payTo), good] };
      expect(chooseRequirement(challenge, [baseSepolia], undefined)?.requirement).toBe(good);
    }
    const only = { version: 2 as const, error: undefined, requirements: [offer(EVM.asset)] };
    expect(chooseRequirement(only, [baseSepolia], undefined)).toBeUndefined();
    // The USDC contract of another chain of the kind the service serves is no payee either.
    const ethereumUsdc = "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48";
    const ethereum: Chain = {
      ...baseSepolia,
      name: "ethereum",
      network: "eip155:1",
      tokens: [{ symbol: "USDC", address: ethereumUsdc, decimals: 6 }],
    };
    const copied = { version: 2 as const, error: undefined, requirements: [offer(ethereumUsdc), good] };
    expect(chooseRequirement(copied, [baseSepolia], undefined, [baseSepolia, ethereum])?.requirement).toBe(
      good,
    );
  });
});

describe("responseFromPaidFetch", () => {
  it("rebuilds binary bodies from base64 byte for byte, drops wire headers, and keeps the payment facts", async () => {
    const bytes = Uint8Array.from([0, 255, 128, 10, 13, 1]);
    const response = responseFromPaidFetch({
      status: 200,
      headers: { "content-type": "application/octet-stream", "content-length": "999", "x-kept": "yes" },
      body: Buffer.from(bytes).toString("base64"),
      bodyEncoding: "base64",
      paymentReceipt: { success: true, txHash: "0xabc" },
      amountCharged: "0.01",
    });
    expect(new Uint8Array(await response.arrayBuffer())).toEqual(bytes);
    expect(response.headers.get("content-length")).toBeNull();
    expect(response.headers.get("x-kept")).toBe("yes");
    expect(response.receipt).toEqual({ success: true, txHash: "0xabc" });
    expect(response.amountCharged).toBe("0.01");
    expect(response.transaction).toBeUndefined();
  });

  it("gives JSON back as JSON, text as text, and a 204 without a body", async () => {
    const json = responseFromPaidFetch({ status: 201, headers: {}, body: { a: [1, "é"] } });
    expect(json.status).toBe(201);
    expect(await json.json()).toEqual({ a: [1, "é"] });
    expect(await responseFromPaidFetch({ status: 200, headers: {}, body: "plain" }).text()).toBe("plain");
    const empty = responseFromPaidFetch({ status: 204, headers: {}, body: "" });
    expect(empty.status).toBe(204);
    expect(empty.body).toBeNull();
  });
});
