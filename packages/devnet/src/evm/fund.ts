import { type Address, createWalletClient, erc20Abi, type Hash, http } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { localEvmChain, localPublicClient } from "./chain.ts";

/** What {@link fundEvm} needs to know about a devnet (a started devnet or the JSON `svc-devnet` prints). */
export interface EvmFundingSource {
  readonly evm: { readonly rpcUrl: string; readonly chainId: number; readonly usdc: Address };
  readonly treasury: { readonly evm: { readonly privateKey: `0x${string}` } };
}

/** Amounts in atomic units: wei for ETH, 10^-6 USDC for USDC. */
export interface EvmFundingAmounts {
  readonly eth?: bigint;
  readonly usdc?: bigint;
}

/** Hashes of the transactions {@link fundEvm} sent, each mined and successful. */
export interface EvmFundingReceipt {
  readonly ethTx?: Hash;
  readonly usdcTx?: Hash;
}

// Treasury transfers from one process are serialised per node so their nonces never collide.
const queues = new Map<string, Promise<unknown>>();

function serialised<T>(key: string, task: () => Promise<T>): Promise<T> {
  const previous = queues.get(key) ?? Promise.resolve();
  const next = previous.then(task, task);
  queues.set(
    key,
    next.catch(() => undefined),
  );
  return next;
}

/**
 * Pays ETH and/or USDC from the EVM treasury to `to` with real transactions, and waits until they are mined.
 *
 * @example
 * ```ts
 * const devnet = await startDevnet();
 * await fundEvm(devnet, "0x70997970C51812dc3A010C7d01b50e0d17dc79C8", { eth: 10n ** 18n, usdc: 5_000_000n });
 * ```
 */
export function fundEvm(
  devnet: EvmFundingSource,
  to: Address,
  amounts: EvmFundingAmounts,
): Promise<EvmFundingReceipt> {
  const { rpcUrl, chainId, usdc } = devnet.evm;
  return serialised(rpcUrl, async () => {
    const client = localPublicClient(chainId, rpcUrl);
    const wallet = createWalletClient({
      account: privateKeyToAccount(devnet.treasury.evm.privateKey),
      chain: localEvmChain(chainId, rpcUrl),
      transport: http(rpcUrl),
      pollingInterval: 25,
    });
    const result: { ethTx?: Hash; usdcTx?: Hash } = {};
    if (amounts.eth !== undefined && amounts.eth > 0n) {
      const hash = await wallet.sendTransaction({ to, value: amounts.eth });
      const receipt = await client.waitForTransactionReceipt({ hash });
      if (receipt.status !== "success") throw new Error(`fundEvm: ETH transfer reverted in ${hash}`);
      result.ethTx = hash;
    }
    if (amounts.usdc !== undefined && amounts.usdc > 0n) {
      const hash = await wallet.writeContract({
        address: usdc,
        abi: erc20Abi,
        functionName: "transfer",
        args: [to, amounts.usdc],
      });
      const receipt = await client.waitForTransactionReceipt({ hash });
      if (receipt.status !== "success") throw new Error(`fundEvm: USDC transfer reverted in ${hash}`);
      result.usdcTx = hash;
    }
    return result;
  });
}
