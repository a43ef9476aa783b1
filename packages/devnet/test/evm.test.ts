import { randomBytes } from "node:crypto";
import {
  type Address,
  createPublicClient,
  createWalletClient,
  encodePacked,
  type Hex,
  http,
  type PublicClient,
  parseEventLogs,
  parseSignature,
} from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../../../test/support/eventually.ts";
import { localEvmChain } from "../src/evm/chain.ts";
import {
  DEVNET_EVM_CHAIN_ID,
  type Devnet,
  fundEvm,
  MULTICALL3_ADDRESS,
  startDevnet,
  USDC_EIP712,
  usdcAbi,
} from "../src/index.ts";

let devnet: Devnet;
let client: PublicClient;

beforeAll(async () => {
  devnet = await startDevnet();
  client = createPublicClient({ transport: http(devnet.evm.rpcUrl), pollingInterval: 25 });
});

afterAll(async () => {
  await devnet?.stop();
});

const authorizationTypes = {
  TransferWithAuthorization: [
    { name: "from", type: "address" },
    { name: "to", type: "address" },
    { name: "value", type: "uint256" },
    { name: "validAfter", type: "uint256" },
    { name: "validBefore", type: "uint256" },
    { name: "nonce", type: "bytes32" },
  ],
} as const;

/** A payer holding USDC, an EIP-3009 authorization it signed with viem, and a relayer with ETH for gas. */
async function signedAuthorization(value: bigint) {
  const payer = privateKeyToAccount(generatePrivateKey());
  const relayer = privateKeyToAccount(generatePrivateKey());
  const payee = privateKeyToAccount(generatePrivateKey()).address;
  await fundEvm(devnet, payer.address, { usdc: value });
  await fundEvm(devnet, relayer.address, { eth: 10n ** 18n });
  const now = BigInt(Math.floor(Date.now() / 1000));
  const message = {
    from: payer.address,
    to: payee,
    value,
    validAfter: now - 600n,
    validBefore: now + 600n,
    nonce: `0x${randomBytes(32).toString("hex")}` as Hex,
  };
  const signature = await payer.signTypedData({
    domain: {
      name: devnet.evm.usdcEip712.name,
      version: devnet.evm.usdcEip712.version,
      chainId: devnet.evm.chainId,
      verifyingContract: devnet.evm.usdc,
    },
    types: authorizationTypes,
    primaryType: "TransferWithAuthorization",
    message,
  });
  const wallet = createWalletClient({
    account: relayer,
    chain: localEvmChain(devnet.evm.chainId, devnet.evm.rpcUrl),
    transport: http(devnet.evm.rpcUrl),
  });
  return { payer, payee, message, signature, wallet };
}

function balanceOf(address: Address): Promise<bigint> {
  return client.readContract({
    address: devnet.evm.usdc,
    abi: usdcAbi,
    functionName: "balanceOf",
    args: [address],
  }) as Promise<bigint>;
}

function authorizationState(authorizer: Address, nonce: Hex): Promise<boolean> {
  return client.readContract({
    address: devnet.evm.usdc,
    abi: usdcAbi,
    functionName: "authorizationState",
    args: [authorizer, nonce],
  }) as Promise<boolean>;
}

describe("local EVM chain", () => {
  it("runs on a local chain id with a 6-decimal USDC whose EIP-712 name and version are readable", async () => {
    expect(devnet.evm.chainId).toBe(DEVNET_EVM_CHAIN_ID);
    expect(await client.getChainId()).toBe(31337);
    const read = (functionName: string) =>
      client.readContract({ address: devnet.evm.usdc, abi: usdcAbi, functionName });
    expect(await read("decimals")).toBe(6);
    expect(await read("name")).toBe(USDC_EIP712.name);
    expect(await read("version")).toBe(USDC_EIP712.version);
    expect(devnet.evm.usdcEip712).toEqual({ name: "USD Coin", version: "2" });
    expect(await balanceOf(devnet.treasury.evm.address)).toBeGreaterThan(0n);
  });

  it("mines each transaction at once, and a block every few seconds while idle: its time moves on", async () => {
    const first = await client.getBlock({ blockTag: "latest" });
    const later = await eventually(async () => {
      const block = await client.getBlock({ blockTag: "latest" });
      return block.number > first.number && block;
    });
    expect(later.timestamp).toBeGreaterThan(first.timestamp);
  });

  it("has Multicall3 at its canonical address", async () => {
    const code = await client.getCode({ address: MULTICALL3_ADDRESS });
    expect(code?.length).toBeGreaterThan(2);
    const chain = localEvmChain(devnet.evm.chainId, devnet.evm.rpcUrl);
    const multicallClient = createPublicClient({ chain, transport: http(devnet.evm.rpcUrl) });
    const [decimals, symbol] = await multicallClient.multicall({
      allowFailure: false,
      contracts: [
        { address: devnet.evm.usdc, abi: usdcAbi, functionName: "decimals" },
        { address: devnet.evm.usdc, abi: usdcAbi, functionName: "symbol" },
      ],
    });
    expect([decimals, symbol]).toEqual([6, "USDC"]);
  });

  it("fundEvm pays ETH and USDC from the treasury on chain", async () => {
    const to = privateKeyToAccount(generatePrivateKey()).address;
    const receipt = await fundEvm(devnet, to, { eth: 123n, usdc: 4_560_000n });
    expect(receipt.ethTx).toMatch(/^0x[0-9a-f]{64}$/);
    expect(receipt.usdcTx).toMatch(/^0x[0-9a-f]{64}$/);
    expect(await client.getBalance({ address: to })).toBe(123n);
    expect(await balanceOf(to)).toBe(4_560_000n);
  });

  it("fundEvm serialises concurrent payments from the treasury", async () => {
    const recipients = [0, 1, 2, 3].map(() => privateKeyToAccount(generatePrivateKey()).address);
    await Promise.all(recipients.map((to) => fundEvm(devnet, to, { usdc: 1_000n })));
    for (const to of recipients) expect(await balanceOf(to)).toBe(1_000n);
  });
});

describe("EIP-3009 transferWithAuthorization", () => {
  it("settles the (v, r, s) form once, flips authorizationState, emits AuthorizationUsed; a replay reverts", async () => {
    const { payer, payee, message, signature, wallet } = await signedAuthorization(2_500_000n);
    const { v, r, s } = parseSignature(signature);
    const args = [
      message.from,
      message.to,
      message.value,
      message.validAfter,
      message.validBefore,
      message.nonce,
      Number(v),
      r,
      s,
    ] as const;
    expect(await authorizationState(payer.address, message.nonce)).toBe(false);

    const hash = await wallet.writeContract({
      address: devnet.evm.usdc,
      abi: usdcAbi,
      functionName: "transferWithAuthorization",
      args,
    });
    const receipt = await client.waitForTransactionReceipt({ hash });
    expect(receipt.status).toBe("success");
    expect(await balanceOf(payee)).toBe(2_500_000n);
    expect(await balanceOf(payer.address)).toBe(0n);
    expect(await authorizationState(payer.address, message.nonce)).toBe(true);
    const used = parseEventLogs({ abi: usdcAbi, logs: receipt.logs, eventName: "AuthorizationUsed" });
    expect(used).toHaveLength(1);
    expect(used[0]?.args).toEqual({ authorizer: payer.address, nonce: message.nonce });

    await expect(
      client.simulateContract({
        account: wallet.account,
        address: devnet.evm.usdc,
        abi: usdcAbi,
        functionName: "transferWithAuthorization",
        args,
      }),
    ).rejects.toThrow(/authorization is used or canceled/);
    const replay = await wallet.writeContract({
      address: devnet.evm.usdc,
      abi: usdcAbi,
      functionName: "transferWithAuthorization",
      args,
      gas: 200_000n,
    });
    expect((await client.waitForTransactionReceipt({ hash: replay })).status).toBe("reverted");
    expect(await balanceOf(payee)).toBe(2_500_000n);
  });

  it("settles the bytes-signature form once; a replay reverts", async () => {
    const { payer, payee, message, signature, wallet } = await signedAuthorization(1_000_000n);
    const args = [
      message.from,
      message.to,
      message.value,
      message.validAfter,
      message.validBefore,
      message.nonce,
      signature,
    ] as const;
    const hash = await wallet.writeContract({
      address: devnet.evm.usdc,
      abi: usdcAbi,
      functionName: "transferWithAuthorization",
      args,
    });
    expect((await client.waitForTransactionReceipt({ hash })).status).toBe("success");
    expect(await balanceOf(payee)).toBe(1_000_000n);
    expect(await authorizationState(payer.address, message.nonce)).toBe(true);

    const replay = await wallet.writeContract({
      address: devnet.evm.usdc,
      abi: usdcAbi,
      functionName: "transferWithAuthorization",
      args,
      gas: 200_000n,
    });
    expect((await client.waitForTransactionReceipt({ hash: replay })).status).toBe("reverted");
    expect(await balanceOf(payee)).toBe(1_000_000n);
  });

  it("rejects an authorization signed for another domain", async () => {
    const { message, wallet } = await signedAuthorization(1_000n);
    const forged = await privateKeyToAccount(generatePrivateKey()).signTypedData({
      domain: { name: "USDC", version: "2", chainId: devnet.evm.chainId, verifyingContract: devnet.evm.usdc },
      types: authorizationTypes,
      primaryType: "TransferWithAuthorization",
      message,
    });
    await expect(
      client.simulateContract({
        account: wallet.account,
        address: devnet.evm.usdc,
        abi: usdcAbi,
        functionName: "transferWithAuthorization",
        args: [
          message.from,
          message.to,
          message.value,
          message.validAfter,
          message.validBefore,
          message.nonce,
          encodePacked(["bytes"], [forged]),
        ],
      }),
    ).rejects.toThrow(/invalid signature/);
  });
});
