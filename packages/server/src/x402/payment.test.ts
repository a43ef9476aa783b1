/**
 * What a signed payment contains, read back with the same libraries a facilitator uses. The end-to-end
 * proof (the reference facilitator and servers accept and settle these) is test/x402-reference.test.ts.
 */
import { randomBytes } from "node:crypto";
import {
  createKeyPairSignerFromPrivateKeyBytes,
  getBase58Encoder,
  getBase64Encoder,
  getCompiledTransactionMessageDecoder,
  getPublicKeyFromAddress,
  getTransactionDecoder,
  type SignatureBytes,
  verifySignature,
} from "@solana/kit";
import { findAssociatedTokenPda, TOKEN_PROGRAM_ADDRESS } from "@solana-program/token";
import { verifyTypedData } from "viem";
import { privateKeyToAddress } from "viem/accounts";
import { describe, expect, it } from "vitest";
import type { ChainConfig } from "../chains/types.ts";
import { AppError } from "../internal/errors.ts";
import { parsePaymentChallenge, selectRequirement } from "./challenge.ts";
import { decodeHeaderJson, encodeHeaderJson } from "./encoding.ts";
import { paymentKeyOf, signPayment } from "./payment.ts";

const EVM_USDC = "0x036CbD53842c5426634e7929541eC2318f3dCF7e";
const SOLANA_USDC = "4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU";
const PAY_TO = "0x209693bc6afc0c5328ba36faf03c514ef312287c";
const SOLANA_PAY_TO = "2wKupLR9q6wXYppw8Gr2NvWxKBUqm4PPJKkQfoxHDBg4";
const FEE_PAYER = "EwWqGE4ZFKLofuestmU4LDdK7XM1N4ALgdZccwYugwGd";
const BLOCKHASH = {
  blockhash: "4uQeVj5tqViQh7yWWGStvkEG1Zmhx6uasJtWCJziofM",
  lastValidBlockHeight: 1234n,
  slot: 1090n,
};
const NOW = new Date("2026-03-01T12:00:00Z");
const NOW_SECONDS = BigInt(NOW.getTime() / 1000);

const baseSepolia: ChainConfig = {
  name: "base-sepolia",
  kind: "evm",
  network: "eip155:84532",
  rpcUrl: "http://127.0.0.1:1",
  nativeToken: { symbol: "ETH", address: null, decimals: 18 },
  tokens: [{ symbol: "USDC", address: EVM_USDC, decimals: 6 }],
  testnet: true,
};
const solanaDevnet: ChainConfig = {
  name: "solana-devnet",
  kind: "solana",
  network: "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1",
  rpcUrl: "http://127.0.0.1:1",
  nativeToken: { symbol: "SOL", address: null, decimals: 9 },
  tokens: [{ symbol: "USDC", address: SOLANA_USDC, decimals: 6 }],
  testnet: true,
};

const evmEntry = {
  scheme: "exact",
  network: "eip155:84532",
  amount: "10000",
  asset: EVM_USDC,
  payTo: PAY_TO,
  maxTimeoutSeconds: 300,
  extra: { name: "USDC", version: "2", assetTransferMethod: "eip3009" },
  somethingNew: { kept: [1, 2] },
};
const solanaEntry = {
  scheme: "exact",
  network: "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1",
  amount: "20000",
  asset: SOLANA_USDC,
  payTo: SOLANA_PAY_TO,
  maxTimeoutSeconds: 60,
  extra: { feePayer: FEE_PAYER },
};

function v2(accepts: unknown[], more: Record<string, unknown> = {}) {
  return parsePaymentChallenge({
    headers: new Headers({ "payment-required": encodeHeaderJson({ x402Version: 2, accepts, ...more }) }),
    body: "{}",
  });
}

function v1(accepts: unknown[]) {
  return parsePaymentChallenge({ headers: new Headers(), body: JSON.stringify({ x402Version: 1, accepts }) });
}

function decoded(value: string): Record<string, any> {
  return decodeHeaderJson(value) as Record<string, any>;
}

/** The v0 message of a payment's wire transaction, with its instructions' program addresses resolved. */
function readSolanaPayment(headerValue: string) {
  const wire = getBase64Encoder().encode(decoded(headerValue).payload.transaction);
  const transaction = getTransactionDecoder().decode(wire);
  const message = getCompiledTransactionMessageDecoder().decode(transaction.messageBytes);
  if (message.version !== 0) throw new Error(`expected a v0 message, got version ${message.version}`);
  const instructions = message.instructions.map((ix) => ({
    program: message.staticAccounts[ix.programAddressIndex],
    accounts: (ix.accountIndices ?? []).map((i) => message.staticAccounts[i]),
    data: Uint8Array.from(ix.data ?? []),
  }));
  return { transaction, message, instructions };
}

function le(data: Uint8Array, bytes: 4 | 8): bigint {
  const view = new DataView(data.buffer, data.byteOffset + 1, bytes);
  return bytes === 4 ? BigInt(view.getUint32(0, true)) : view.getBigUint64(0, true);
}

describe("signPayment on EVM (EIP-3009)", () => {
  const privateKey = randomBytes(32);
  const payer = privateKeyToAddress(`0x${privateKey.toString("hex")}`);

  it("signs a TransferWithAuthorization of exactly the amount under the domain from extra", async () => {
    const challenge = v2([evmEntry]);
    const selected = selectRequirement(challenge, { chains: [baseSepolia] });
    const signed = await signPayment({ challenge, selected, privateKey, now: NOW });
    const { authorization, signature } = decoded(signed.header.value).payload;
    expect(authorization).toEqual({
      from: payer,
      to: "0x209693Bc6afc0C5328bA36FaF03C514EF312287C",
      value: "10000",
      validAfter: String(NOW_SECONDS - 600n),
      validBefore: String(NOW_SECONDS + 300n),
      nonce: expect.stringMatching(/^0x[0-9a-f]{64}$/),
    });
    const valid = await verifyTypedData({
      address: payer,
      domain: { name: "USDC", version: "2", chainId: 84532, verifyingContract: EVM_USDC },
      types: {
        TransferWithAuthorization: [
          { name: "from", type: "address" },
          { name: "to", type: "address" },
          { name: "value", type: "uint256" },
          { name: "validAfter", type: "uint256" },
          { name: "validBefore", type: "uint256" },
          { name: "nonce", type: "bytes32" },
        ],
      },
      primaryType: "TransferWithAuthorization",
      message: {
        ...authorization,
        value: BigInt(authorization.value),
        validAfter: BigInt(authorization.validAfter),
        validBefore: BigInt(authorization.validBefore),
      },
      signature,
    });
    expect(valid).toBe(true);
    expect(signed).toMatchObject({
      payer,
      onChain: { kind: "evm", token: EVM_USDC, authorizer: payer, nonce: authorization.nonce },
    });
  });

  it("takes only name and version from a hostile extra: chain id, contract, amount and payee stay the chain's and the challenge's", async () => {
    const otherToken = "0x1111111111111111111111111111111111111111";
    const hostile = {
      ...evmEntry,
      extra: {
        name: "USDC",
        version: "2",
        chainId: 1,
        verifyingContract: otherToken,
        decimals: 18,
        to: otherToken,
        value: "999999999999",
      },
    };
    const challenge = v2([hostile]);
    const signed = await signPayment({
      challenge,
      selected: selectRequirement(challenge, { chains: [baseSepolia] }),
      privateKey,
      now: NOW,
    });
    const { authorization, signature } = decoded(signed.header.value).payload;
    expect(authorization).toMatchObject({ to: "0x209693Bc6afc0C5328bA36FaF03C514EF312287C", value: "10000" });
    const message = {
      ...authorization,
      value: BigInt(authorization.value),
      validAfter: BigInt(authorization.validAfter),
      validBefore: BigInt(authorization.validBefore),
    };
    const types = {
      TransferWithAuthorization: [
        { name: "from", type: "address" },
        { name: "to", type: "address" },
        { name: "value", type: "uint256" },
        { name: "validAfter", type: "uint256" },
        { name: "validBefore", type: "uint256" },
        { name: "nonce", type: "bytes32" },
      ],
    } as const;
    const signedUnder = (domain: { chainId: number; verifyingContract: `0x${string}` }) =>
      verifyTypedData({
        address: payer,
        domain: { name: "USDC", version: "2", ...domain },
        types,
        primaryType: "TransferWithAuthorization",
        message,
        signature,
      });
    expect(await signedUnder({ chainId: 84532, verifyingContract: EVM_USDC })).toBe(true);
    expect(await signedUnder({ chainId: 1, verifyingContract: otherToken })).toBe(false);
    expect(await signedUnder({ chainId: 84532, verifyingContract: otherToken })).toBe(false);
  });

  it("sends v2 as PAYMENT-SIGNATURE with the accepts entry verbatim, the resource and the extensions", async () => {
    const resource = { url: "https://api.example.com/weather", description: "Weather" };
    const extensions = { bazaar: { info: { input: { type: "http" } } } };
    const challenge = v2([evmEntry], { resource, extensions });
    const signed = await signPayment({
      challenge,
      selected: selectRequirement(challenge, { chains: [baseSepolia] }),
      privateKey,
      now: NOW,
    });
    expect(signed.header.name).toBe("PAYMENT-SIGNATURE");
    expect(signed.header.value).toMatch(/^[A-Za-z0-9+/]+={0,2}$/);
    const document = decoded(signed.header.value);
    expect(Object.keys(document)).toEqual(["x402Version", "resource", "accepted", "payload", "extensions"]);
    expect(document).toMatchObject({ x402Version: 2, resource, accepted: evmEntry, extensions });
    // Verbatim: the same JSON text, key order and unknown fields included.
    expect(JSON.stringify(document.accepted)).toBe(JSON.stringify(evmEntry));
  });

  it("sends v1 as X-PAYMENT with the network as the server named it", async () => {
    const entry = { ...evmEntry, network: "base-sepolia", maxAmountRequired: "10000", amount: undefined };
    const challenge = v1([entry]);
    const signed = await signPayment({
      challenge,
      selected: selectRequirement(challenge, { chains: [baseSepolia] }),
      privateKey,
      now: NOW,
    });
    expect(signed.header.name).toBe("X-PAYMENT");
    const document = decoded(signed.header.value);
    expect(Object.keys(document)).toEqual(["x402Version", "scheme", "network", "payload"]);
    expect(document).toMatchObject({ x402Version: 1, scheme: "exact", network: "base-sepolia" });
    expect(document.payload.authorization.value).toBe("10000");
  });

  it("bounds the authorization's life to an hour and uses a fresh nonce each time", async () => {
    const challenge = v2([{ ...evmEntry, maxTimeoutSeconds: 86_400 }]);
    const selected = selectRequirement(challenge, { chains: [baseSepolia] });
    const first = await signPayment({ challenge, selected, privateKey, now: NOW });
    const second = await signPayment({ challenge, selected, privateKey, now: NOW });
    expect(decoded(first.header.value).payload.authorization.validBefore).toBe(String(NOW_SECONDS + 3600n));
    expect(first.onChain).toMatchObject({ validBefore: NOW_SECONDS + 3600n });
    expect(decoded(first.header.value).payload.authorization.nonce).not.toBe(
      decoded(second.header.value).payload.authorization.nonce,
    );
  });
});

describe("signPayment on Solana (partially signed TransferChecked)", () => {
  it("builds the reference payer's transaction, fee payer the facilitator's, signed by the payer only", async () => {
    const seed = randomBytes(32);
    const payer = await createKeyPairSignerFromPrivateKeyBytes(seed);
    const challenge = v2([solanaEntry]);
    const signed = await signPayment({
      challenge,
      selected: selectRequirement(challenge, { chains: [solanaDevnet] }),
      privateKey: seed,
      now: NOW,
      recentBlockhash: BLOCKHASH,
    });
    const { transaction, message, instructions } = readSolanaPayment(signed.header.value);
    expect(message.staticAccounts[0]).toBe(FEE_PAYER);
    expect(message.lifetimeToken).toBe(BLOCKHASH.blockhash);
    // The fee payer's slot is empty: the facilitator signs it.
    expect(transaction.signatures[FEE_PAYER as never]).toBeNull();
    const payerSignature = transaction.signatures[payer.address] as SignatureBytes;
    expect(
      await verifySignature(
        await getPublicKeyFromAddress(payer.address),
        payerSignature,
        transaction.messageBytes,
      ),
    ).toBe(true);

    const [source] = await findAssociatedTokenPda({
      owner: payer.address,
      mint: SOLANA_USDC as never,
      tokenProgram: TOKEN_PROGRAM_ADDRESS,
    });
    const [destination] = await findAssociatedTokenPda({
      owner: SOLANA_PAY_TO as never,
      mint: SOLANA_USDC as never,
      tokenProgram: TOKEN_PROGRAM_ADDRESS,
    });
    expect(instructions.map(({ program, accounts, data }) => ({ program, accounts, kind: data[0] }))).toEqual(
      [
        { program: "ComputeBudget111111111111111111111111111111", accounts: [], kind: 2 },
        { program: "ComputeBudget111111111111111111111111111111", accounts: [], kind: 3 },
        {
          program: TOKEN_PROGRAM_ADDRESS,
          accounts: [source, SOLANA_USDC, destination, payer.address],
          kind: 12,
        },
        { program: "MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr", accounts: [], kind: expect.any(Number) },
      ],
    );
    const [limit, price, transfer, memo] = instructions.map((ix) => ix.data);
    expect(le(limit ?? new Uint8Array(5), 4)).toBeGreaterThan(16_000n);
    expect(le(limit ?? new Uint8Array(5), 4)).toBeLessThanOrEqual(20_000n);
    expect(le(price ?? new Uint8Array(9), 8)).toBe(1n);
    expect([le(transfer ?? new Uint8Array(10), 8), transfer?.[9]]).toEqual([20_000n, 6]);
    expect(new TextDecoder().decode(memo)).toMatch(/^[0-9a-f]{32}$/);
    expect(signed.onChain).toEqual({
      kind: "solana",
      payerSignature: expect.any(String),
      sourceTokenAccount: source,
      lastValidBlockHeight: 1234n,
      blockhashSlot: 1090n,
    });
    expect(getBase58Encoder().encode((signed.onChain as { payerSignature: string }).payerSignature)).toEqual(
      payerSignature,
    );
  });

  it("signs only the transfer whatever extra says: no other mint, decimals, destination, price or instruction", async () => {
    const seed = randomBytes(32);
    const payer = await createKeyPairSignerFromPrivateKeyBytes(seed);
    const otherMint = "So11111111111111111111111111111111111111112";
    const challenge = v2([
      {
        ...solanaEntry,
        extra: {
          feePayer: FEE_PAYER,
          tokenProgram: TOKEN_PROGRAM_ADDRESS,
          mint: otherMint,
          asset: otherMint,
          decimals: 0,
          destination: FEE_PAYER,
          computeUnitPrice: "1000000000",
          computeUnitLimit: 1_400_000,
          instructions: [{ programAddress: "11111111111111111111111111111111", data: "AgAAAA==" }],
        },
      },
    ]);
    const signed = await signPayment({
      challenge,
      selected: selectRequirement(challenge, { chains: [solanaDevnet] }),
      privateKey: seed,
      now: NOW,
      recentBlockhash: BLOCKHASH,
    });
    const { transaction, message, instructions } = readSolanaPayment(signed.header.value);
    const [source] = await findAssociatedTokenPda({
      owner: payer.address,
      mint: SOLANA_USDC as never,
      tokenProgram: TOKEN_PROGRAM_ADDRESS,
    });
    const [destination] = await findAssociatedTokenPda({
      owner: SOLANA_PAY_TO as never,
      mint: SOLANA_USDC as never,
      tokenProgram: TOKEN_PROGRAM_ADDRESS,
    });
    expect(instructions.map(({ program, accounts }) => ({ program, accounts }))).toEqual([
      { program: "ComputeBudget111111111111111111111111111111", accounts: [] },
      { program: "ComputeBudget111111111111111111111111111111", accounts: [] },
      { program: TOKEN_PROGRAM_ADDRESS, accounts: [source, SOLANA_USDC, destination, payer.address] },
      { program: "MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr", accounts: [] },
    ]);
    const [limit, price, transfer] = instructions.map((ix) => ix.data);
    expect(le(limit ?? new Uint8Array(5), 4)).toBeLessThanOrEqual(20_000n);
    expect(le(price ?? new Uint8Array(9), 8)).toBe(1n);
    expect([le(transfer ?? new Uint8Array(10), 8), transfer?.[9]]).toEqual([20_000n, 6]);
    expect(message.staticAccounts).not.toContain(otherMint);
    // Two signers: the fee payer (left for the facilitator) and the payer, nobody else.
    expect(Object.keys(transaction.signatures).sort()).toEqual([FEE_PAYER, payer.address].sort());
  });

  it("carries the seller's memo when the challenge sets one", async () => {
    const challenge = v2([{ ...solanaEntry, extra: { feePayer: FEE_PAYER, memo: "order-42" } }]);
    const signed = await signPayment({
      challenge,
      selected: selectRequirement(challenge, { chains: [solanaDevnet] }),
      privateKey: randomBytes(32),
      now: NOW,
      recentBlockhash: BLOCKHASH,
    });
    const { instructions } = readSolanaPayment(signed.header.value);
    expect(new TextDecoder().decode(instructions[3]?.data)).toBe("order-42");
  });

  it("signs two payments alike in every field, the seller's memo included, as two transactions", async () => {
    const seed = randomBytes(32);
    const challenge = v2([{ ...solanaEntry, extra: { feePayer: FEE_PAYER, memo: "order-42" } }]);
    const sign = () =>
      signPayment({
        challenge,
        selected: selectRequirement(challenge, { chains: [solanaDevnet] }),
        privateKey: seed,
        now: NOW,
        recentBlockhash: BLOCKHASH,
      });
    const payments = await Promise.all([sign(), sign(), sign()]);
    const keys = payments.map((payment) => paymentKeyOf(payment.onChain));
    expect(new Set(keys).size).toBe(3);
    // They differ in the compute-unit limit alone, each at most the reference payer's 20,000.
    const limits = payments.map((payment) =>
      le(readSolanaPayment(payment.header.value).instructions[0]?.data ?? new Uint8Array(5), 4),
    );
    expect(new Set(limits).size).toBe(3);
    for (const limit of limits) expect(limit).toBeLessThanOrEqual(20_000n);
  });

  it("refuses a challenge naming the paying wallet as its own fee payer", async () => {
    const seed = randomBytes(32);
    const payer = await createKeyPairSignerFromPrivateKeyBytes(seed);
    const challenge = v2([{ ...solanaEntry, extra: { feePayer: payer.address } }]);
    const error = await signPayment({
      challenge,
      selected: selectRequirement(challenge, { chains: [solanaDevnet] }),
      privateKey: seed,
      now: NOW,
      recentBlockhash: BLOCKHASH,
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AppError);
    expect(error).toMatchObject({ status: 400, reason: "no_payable_requirement" });
  });

  it("needs the blockhash to be read before signing", async () => {
    const challenge = v2([solanaEntry]);
    await expect(
      signPayment({
        challenge,
        selected: selectRequirement(challenge, { chains: [solanaDevnet] }),
        privateKey: randomBytes(32),
        now: NOW,
      }),
    ).rejects.toThrow("a Solana payment needs a recent blockhash, read before signing");
  });
});
