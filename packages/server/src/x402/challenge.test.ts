import { describe, expect, it } from "vitest";
import type { ChainConfig } from "../chains/types.ts";
import { AppError } from "../internal/errors.ts";
import { type PaymentChallenge, parsePaymentChallenge, selectRequirement } from "./challenge.ts";
import { encodeHeaderJson } from "./encoding.ts";

const EVM_USDC = "0x036CbD53842c5426634e7929541eC2318f3dCF7e";
const SOLANA_USDC = "4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU";
const PAY_TO = "0x209693Bc6afc0C5328bA36FaF03C514EF312287C";
const SOLANA_PAY_TO = "2wKupLR9q6wXYppw8Gr2NvWxKBUqm4PPJKkQfoxHDBg4";
const FEE_PAYER = "EwWqGE4ZFKLofuestmU4LDdK7XM1N4ALgdZccwYugwGd";

const baseSepolia: ChainConfig = {
  name: "base-sepolia",
  kind: "evm",
  network: "eip155:84532",
  rpcUrl: "http://127.0.0.1:1",
  nativeToken: { symbol: "ETH", address: null, decimals: 18 },
  tokens: [{ symbol: "USDC", address: EVM_USDC, decimals: 6, usdPrice: "1" }],
  testnet: true,
};
const solanaDevnet: ChainConfig = {
  name: "solana-devnet",
  kind: "solana",
  network: "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1",
  rpcUrl: "http://127.0.0.1:1",
  nativeToken: { symbol: "SOL", address: null, decimals: 9 },
  tokens: [{ symbol: "USDC", address: SOLANA_USDC, decimals: 6, usdPrice: "1" }],
  testnet: true,
};

const v1Entry = {
  scheme: "exact",
  network: "base-sepolia",
  maxAmountRequired: "10000",
  resource: "https://api.example.com/weather",
  description: "",
  mimeType: "",
  payTo: PAY_TO,
  maxTimeoutSeconds: 60,
  asset: EVM_USDC,
  outputSchema: null,
  extra: { name: "USDC", version: "2" },
};
const v2Entry = {
  scheme: "exact",
  network: "eip155:84532",
  amount: "10000",
  asset: EVM_USDC,
  payTo: PAY_TO,
  maxTimeoutSeconds: 300,
  extra: { name: "USDC", version: "2", assetTransferMethod: "eip3009" },
};
const v2SolanaEntry = {
  scheme: "exact",
  network: "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1",
  amount: "20000",
  asset: SOLANA_USDC,
  payTo: SOLANA_PAY_TO,
  maxTimeoutSeconds: 60,
  extra: { feePayer: FEE_PAYER },
};

function v1Response(body: unknown) {
  return { headers: new Headers({ "content-type": "application/json" }), body: JSON.stringify(body) };
}

function v2Response(document: unknown, body = "{}") {
  return { headers: new Headers({ "payment-required": encodeHeaderJson(document) }), body };
}

function thrown(run: () => unknown): AppError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(AppError);
    return error as AppError;
  }
  throw new Error("expected an error");
}

describe("parsePaymentChallenge", () => {
  it("reads a v1 challenge from the body, mapping the v1 network name", () => {
    const challenge = parsePaymentChallenge(
      v1Response({ x402Version: 1, error: "X-PAYMENT header is required", accepts: [v1Entry] }),
    );
    expect(challenge).toMatchObject({ version: 1, error: "X-PAYMENT header is required", skipped: [] });
    expect(challenge.requirements).toEqual([
      {
        scheme: "exact",
        network: "base-sepolia",
        caip2: "eip155:84532",
        amount: 10000n,
        asset: EVM_USDC,
        payTo: PAY_TO,
        maxTimeoutSeconds: 60,
        extra: { name: "USDC", version: "2" },
        raw: v1Entry,
      },
    ]);
  });

  it("reads a v2 challenge from PAYMENT-REQUIRED, ignoring the body, and keeps resource and extensions", () => {
    const document = {
      x402Version: 2,
      error: "Payment required",
      resource: { url: "https://api.example.com/weather", mimeType: "application/json" },
      accepts: [v2Entry, v2SolanaEntry],
      extensions: { bazaar: { info: { x: 1 } } },
    };
    const challenge = parsePaymentChallenge(
      v2Response(document, JSON.stringify({ x402Version: 1, accepts: [] })),
    );
    expect(challenge.version).toBe(2);
    expect(challenge.resource).toEqual(document.resource);
    expect(challenge.extensions).toEqual(document.extensions);
    expect(challenge.requirements.map((r) => [r.caip2, r.amount])).toEqual([
      ["eip155:84532", 10000n],
      ["solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1", 20000n],
    ]);
    expect(challenge.requirements[0]?.raw).toEqual(document.accepts[0]);
  });

  it("reads unpadded and URL-safe base64 headers", () => {
    const value = encodeHeaderJson({ x402Version: 2, accepts: [v2Entry] });
    const urlSafe = value.replace(/=+$/, "").replace(/\+/g, "-").replace(/\//g, "_");
    const challenge = parsePaymentChallenge({
      headers: new Headers({ "PAYMENT-REQUIRED": urlSafe }),
      body: "",
    });
    expect(challenge.requirements).toHaveLength(1);
  });

  it("is lenient on what does not decide the payment", () => {
    const loose = {
      ...v1Entry,
      extra: null,
      outputSchema: null,
      description: undefined,
      maxTimeoutSeconds: "x",
    };
    const challenge = parsePaymentChallenge(v1Response({ x402Version: 1, error: 42, accepts: [loose] }));
    expect(challenge.error).toBeUndefined();
    expect(challenge.requirements[0]).toMatchObject({ extra: {}, maxTimeoutSeconds: 60 });
  });

  it.each([
    [{ maxAmountRequired: 10000 }, "maxAmountRequired must be a positive integer"],
    [{ maxAmountRequired: "0" }, "maxAmountRequired must be a positive integer"],
    [{ maxAmountRequired: "-5" }, "maxAmountRequired must be a positive integer"],
    [{ maxAmountRequired: "1.5" }, "maxAmountRequired must be a positive integer"],
    [{ maxAmountRequired: "1e6" }, "maxAmountRequired must be a positive integer"],
    [{ maxAmountRequired: `1${"0".repeat(78)}` }, "maxAmountRequired must be a positive integer"],
    [{ network: "base-goerli-classic" }, 'unknown network "base-goerli-classic"'],
    [{ network: 8453 }, "no network"],
    [{ scheme: "upto" }, 'scheme "upto" is not paid'],
    [{ payTo: "" }, "no payTo"],
    [{ asset: null }, "no asset"],
  ])("skips an entry with %o, saying why", (change, reason) => {
    const challenge = parsePaymentChallenge(
      v1Response({ x402Version: 1, accepts: [{ ...v1Entry, ...change }, v1Entry] }),
    );
    expect(challenge.requirements).toHaveLength(1);
    expect(challenge.skipped).toEqual([{ index: 0, reason: expect.stringContaining(reason) }]);
  });

  it.each([
    [
      "a PAYMENT-REQUIRED header that is not base64 JSON",
      { headers: new Headers({ "payment-required": "%%%" }), body: "" },
    ],
    ["a v1 document in PAYMENT-REQUIRED", v2Response({ x402Version: 1, accepts: [v1Entry] })],
    ["an HTML paywall", { headers: new Headers(), body: "<html>Pay here</html>" }],
    ["JSON without x402Version", v1Response({ accepts: [v1Entry] })],
    ["no accepts list", v1Response({ x402Version: 1, error: "pay" })],
  ])("refuses %s with 502 invalid_payment_challenge", (_name, response) => {
    expect(thrown(() => parsePaymentChallenge(response))).toMatchObject({
      status: 502,
      reason: "invalid_payment_challenge",
    });
  });
});

describe("selectRequirement", () => {
  const both = (): PaymentChallenge =>
    parsePaymentChallenge(v2Response({ x402Version: 2, accepts: [v2Entry, v2SolanaEntry] }));

  it("chooses the server's first payable entry", () => {
    const { requirement, chain, token } = selectRequirement(both(), { chains: [baseSepolia, solanaDevnet] });
    expect([requirement.caip2, chain.name, token.symbol]).toEqual(["eip155:84532", "base-sepolia", "USDC"]);
  });

  it("skips networks the wallet does not hold", () => {
    expect(selectRequirement(both(), { chains: [solanaDevnet] }).chain.name).toBe("solana-devnet");
  });

  it("honours the caller's chain", () => {
    const chosen = selectRequirement(both(), { chains: [baseSepolia, solanaDevnet], chain: "solana-devnet" });
    expect(chosen.requirement.amount).toBe(20000n);
  });

  it("matches EVM assets without case and v1 names to their chain", () => {
    const challenge = parsePaymentChallenge(
      v1Response({ x402Version: 1, accepts: [{ ...v1Entry, asset: EVM_USDC.toLowerCase() }] }),
    );
    expect(selectRequirement(challenge, { chains: [baseSepolia] }).chain.name).toBe("base-sepolia");
  });

  it("pays an amount equal to maxAmount and refuses one over it with 400 max_amount_exceeded", () => {
    expect(selectRequirement(both(), { chains: [baseSepolia], maxAmount: "0.01" }).requirement.amount).toBe(
      10000n,
    );
    const error = thrown(() =>
      selectRequirement(both(), { chains: [baseSepolia, solanaDevnet], maxAmount: "0.009999" }),
    );
    expect(error).toMatchObject({ status: 400, code: "ValidationError", reason: "max_amount_exceeded" });
    expect(error.message).toBe("Every payment the resource accepts is over maxAmount 0.009999");
    expect(error.details?.refused).toEqual([
      expect.objectContaining({ network: "eip155:84532", reason: "0.01 USDC is over maxAmount 0.009999" }),
      expect.objectContaining({
        network: v2SolanaEntry.network,
        reason: "0.02 USDC is over maxAmount 0.009999",
      }),
    ]);
  });

  it("falls through to a cheaper entry when the first is over maxAmount", () => {
    const challenge = parsePaymentChallenge(
      v2Response({ x402Version: 2, accepts: [v2SolanaEntry, v2Entry] }),
    );
    expect(
      selectRequirement(challenge, { chains: [baseSepolia, solanaDevnet], maxAmount: "0.015" }).chain.name,
    ).toBe("base-sepolia");
  });

  it.each([
    ["a network the wallet lacks", { accepts: [v2SolanaEntry] }, "is not one of this wallet's chains"],
    [
      "an asset the chain does not serve",
      { accepts: [{ ...v2Entry, asset: PAY_TO }] },
      "is not a token this service pays",
    ],
    [
      "a zero payee",
      { accepts: [{ ...v2Entry, payTo: `0x${"0".repeat(40)}` }] },
      "payTo is the zero address",
    ],
    [
      "a payee that is the token's own contract",
      { accepts: [{ ...v2Entry, payTo: v2Entry.asset.toLowerCase() }] },
      "payTo is the USDC contract",
    ],
    ["a malformed payee", { accepts: [{ ...v2Entry, payTo: "0x1234" }] }, "is not an EVM address"],
    ["no EIP-712 domain", { accepts: [{ ...v2Entry, extra: {} }] }, "extra.name and extra.version"],
    ["only unpaid schemes", { accepts: [{ ...v2Entry, scheme: "upto" }] }, ""],
  ])("refuses %s with 400 no_payable_requirement", (_name, document, reason) => {
    const challenge = parsePaymentChallenge(v2Response({ x402Version: 2, ...document }));
    const error = thrown(() => selectRequirement(challenge, { chains: [baseSepolia] }));
    expect(error).toMatchObject({ status: 400, reason: "no_payable_requirement" });
    if (reason)
      expect(error.details?.refused).toEqual([
        expect.objectContaining({ reason: expect.stringContaining(reason) }),
      ]);
  });

  it("refuses a Solana entry without a fee payer", () => {
    const challenge = parsePaymentChallenge(
      v2Response({ x402Version: 2, accepts: [{ ...v2SolanaEntry, extra: { memo: "x" } }] }),
    );
    const error = thrown(() => selectRequirement(challenge, { chains: [solanaDevnet] }));
    expect(error.details?.refused).toEqual([
      expect.objectContaining({ reason: expect.stringContaining("extra.feePayer") }),
    ]);
  });

  it("keeps the refusal small whatever the challenge holds: the first 32 entries read, long strings cut", () => {
    const accepts = Array.from({ length: 5000 }, (_, i) => ({
      ...v2Entry,
      network: `eip155:${1_000_000 + i}`,
      asset: `0x${"ab".repeat(20)}${"f".repeat(100_000 / 5000)}`,
    }));
    accepts[0] = { ...v2Entry, asset: "x".repeat(100_000) };
    const challenge = parsePaymentChallenge(v2Response({ x402Version: 2, accepts }));
    expect(challenge.requirements).toHaveLength(32);
    const error = thrown(() => selectRequirement(challenge, { chains: [baseSepolia] }));
    expect(JSON.stringify({ message: error.message, details: error.details }).length).toBeLessThan(16_384);
    expect(error.details?.skipped).toEqual([
      { index: 32, reason: "the entries after the first 32 are not read (4968 more)" },
    ]);
  });

  it("says which networks were offered when none is payable", () => {
    const error = thrown(() => selectRequirement(both(), { chains: [baseSepolia], chain: "base" }));
    expect(error.message).toBe(
      "The resource accepts payment on eip155:84532, solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1; none can be paid from this wallet",
    );
  });
});
