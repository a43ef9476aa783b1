import { randomBytes } from "node:crypto";
import {
  encodeFunctionData,
  erc20Abi,
  parseTransaction,
  recoverTransactionAddress,
  recoverTypedDataAddress,
  type TransactionSerializableEIP1559,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { evmAddressOf, signEvmTransaction, signEvmTypedData } from "./evm-keys.ts";

const USDC = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913";

const transaction: TransactionSerializableEIP1559 = {
  type: "eip1559",
  chainId: 8453,
  nonce: 7,
  to: USDC,
  value: 0n,
  data: encodeFunctionData({
    abi: erc20Abi,
    functionName: "transfer",
    args: ["0x70997970C51812dc3A010C7d01b50e0d17dc79C8", 1_000_000n],
  }),
  gas: 60_000n,
  maxFeePerGas: 2_000_000_000n,
  maxPriorityFeePerGas: 1_000_000n,
};

// EIP-712's own example: nested structs, strings, a domain with a verifying contract.
const typedData = {
  domain: { name: "Ether Mail", version: "1", chainId: 1, verifyingContract: USDC },
  types: {
    Person: [
      { name: "name", type: "string" },
      { name: "wallet", type: "address" },
    ],
    Mail: [
      { name: "from", type: "Person" },
      { name: "to", type: "Person" },
      { name: "contents", type: "string" },
    ],
  },
  primaryType: "Mail",
  message: {
    from: { name: "Cow", wallet: "0xCD2a3d9F938E13CD947Ec05AbC7FE734Df8DD826" },
    to: { name: "Bob", wallet: "0xbBbBBBBbbBBBbbbBbbBbbbbBBbBbbbbBbBbbBBbB" },
    contents: "Hello, Bob!",
  },
} as const;

describe("EVM keys through libsecp256k1", () => {
  it("derives the address of a known key", () => {
    // Anvil's first development account.
    const key = Buffer.from("ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80", "hex");
    expect(evmAddressOf(key)).toBe("0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266");
  });

  it("matches viem's signer byte for byte on random keys, and the signatures recover to the key's address", async () => {
    for (let i = 0; i < 25; i++) {
      const key = randomBytes(32);
      const account = privateKeyToAccount(`0x${key.toString("hex")}`);
      const tx = { ...transaction, nonce: i };
      expect(evmAddressOf(key)).toBe(account.address);
      const raw = signEvmTransaction(tx, key);
      expect(raw).toBe(await account.signTransaction(tx));
      expect(await recoverTransactionAddress({ serializedTransaction: raw as never })).toBe(account.address);
      const signature = signEvmTypedData(typedData, key);
      expect(signature).toBe(await account.signTypedData(typedData));
      expect(await recoverTypedDataAddress({ ...typedData, signature })).toBe(account.address);
    }
  });

  it("matches viem where r or s begins with a zero byte, which the encoding drops", async () => {
    // Anvil's first account signs the test transaction with these nonces into an r (132) or an s (368)
    // below 2^248.
    const key = Buffer.from("ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80", "hex");
    const account = privateKeyToAccount(`0x${key.toString("hex")}`);
    for (const [nonce, part] of [
      [132, "r"],
      [368, "s"],
    ] as const) {
      const raw = signEvmTransaction({ ...transaction, nonce }, key);
      expect(BigInt(parseTransaction(raw)[part] ?? "0x0")).toBeLessThan(2n ** 248n);
      expect(raw).toBe(await account.signTransaction({ ...transaction, nonce }));
    }
  });

  it("answers each key's own address when asked again, a key whose bytes changed in place included", () => {
    const keys = Array.from({ length: 20 }, () => randomBytes(32));
    const first = keys.map((key) => evmAddressOf(key));
    expect(new Set(first).size).toBe(20);
    expect(keys.map((key) => evmAddressOf(key))).toEqual(first);
    // A buffer whose bytes change in place (a caller reusing it) gives the address of what it holds now.
    const buffer = Buffer.from(keys[0] as Buffer);
    expect(evmAddressOf(buffer)).toBe(first[0]);
    (keys[1] as Buffer).copy(buffer);
    expect(evmAddressOf(buffer)).toBe(first[1]);
    expect(evmAddressOf(buffer)).toBe(privateKeyToAccount(`0x${buffer.toString("hex")}`).address);
  });

  it("refuses a secret outside the curve's range", () => {
    expect(() => evmAddressOf(new Uint8Array(32))).toThrow();
    expect(() => signEvmTransaction(transaction, Buffer.alloc(32, 0xff))).toThrow();
  });
});
