import {
  type Address,
  type Chain,
  createPublicClient,
  createTestClient,
  createWalletClient,
  defineChain,
  http,
  type PublicClient,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { EVM_TREASURY_PRIVATE_KEY } from "../keys.ts";
import { startAnvil } from "./anvil.ts";
import { MULTICALL3_ADDRESS, MULTICALL3_RUNTIME_CODE } from "./multicall3.ts";
import { deployUsdc } from "./usdc.ts";

/** The local EVM chain as started by {@link startEvmChain}. */
export interface LocalEvmChain {
  readonly rpcUrl: string;
  readonly chainId: number;
  readonly usdc: Address;
  stop(): Promise<void>;
}

/** A viem chain definition for the local node. */
export function localEvmChain(chainId: number, rpcUrl: string): Chain {
  return defineChain({
    id: chainId,
    name: "Svc devnet (anvil)",
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
    contracts: { multicall3: { address: MULTICALL3_ADDRESS } },
  });
}

/** Public client for the local node; polls fast because anvil mines each transaction at once. */
export function localPublicClient(chainId: number, rpcUrl: string): PublicClient {
  return createPublicClient({
    chain: localEvmChain(chainId, rpcUrl),
    transport: http(rpcUrl),
    pollingInterval: 25,
  });
}

/**
 * Starts anvil, places Multicall3, deploys the USDC-like token and mints `initialUsdc` to the treasury.
 */
export async function startEvmChain(options: {
  chainId: number;
  port?: number;
  initialUsdc: bigint;
}): Promise<LocalEvmChain> {
  const anvil = await startAnvil(
    options.port === undefined
      ? { chainId: options.chainId }
      : { chainId: options.chainId, port: options.port },
  );
  try {
    const chain = localEvmChain(options.chainId, anvil.rpcUrl);
    const client = localPublicClient(options.chainId, anvil.rpcUrl);
    const wallet = createWalletClient({
      account: privateKeyToAccount(EVM_TREASURY_PRIVATE_KEY),
      chain,
      transport: http(anvil.rpcUrl),
      pollingInterval: 25,
    });
    await createTestClient({ mode: "anvil", chain, transport: http(anvil.rpcUrl) }).setCode({
      address: MULTICALL3_ADDRESS,
      bytecode: MULTICALL3_RUNTIME_CODE,
    });
    const usdc = await deployUsdc(wallet, client, options.initialUsdc);
    return { rpcUrl: anvil.rpcUrl, chainId: options.chainId, usdc, stop: () => anvil.stop() };
  } catch (err) {
    await anvil.stop();
    throw err;
  }
}
