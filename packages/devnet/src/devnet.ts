import { type Address, getAddress } from "viem";
import { type LocalEvmChain, startEvmChain } from "./evm/chain.ts";
import { USDC_EIP712 } from "./evm/usdc.ts";
import { DEVNET_EVM_CHAIN_ID, EVM_TREASURY_ADDRESS, EVM_TREASURY_PRIVATE_KEY } from "./keys.ts";

/** Options for {@link startDevnet}. Every field has a default that suits tests. */
export interface DevnetOptions {
  /** EVM chain id; default 31337 (anvil's, no public network's). */
  readonly evmChainId?: number;
  /** anvil port; default 0 (a free port). */
  readonly evmPort?: number;
  /** USDC minted to the EVM treasury, atomic units; default 1e9 USDC. */
  readonly evmTreasuryUsdc?: bigint;
}

/** Facts about a running devnet: plain data, also what `svc-devnet` prints as JSON. */
export interface DevnetInfo {
  readonly evm: {
    readonly rpcUrl: string;
    readonly chainId: number;
    /** Address of the USDC-like EIP-3009 token (Circle's FiatTokenV2_2, 6 decimals). */
    readonly usdc: Address;
    /** EIP-712 domain name and version of the token, as x402's `extra` carries them. */
    readonly usdcEip712: { readonly name: string; readonly version: string };
  };
  readonly treasury: {
    /** LOCAL DEV KEY (anvil's first account): never valid on a public chain. */
    readonly evm: { readonly address: Address; readonly privateKey: `0x${string}` };
  };
}

/** A running devnet. */
export interface Devnet extends DevnetInfo {
  /** Stops anvil and the Solana RPC server. Safe to call more than once. */
  stop(): Promise<void>;
}

/**
 * Starts the local chains on 127.0.0.1 with free ports: anvil (cancun) with a USDC-like EIP-3009 token and
 * Multicall3, and a funded treasury.
 *
 * @example
 * ```ts
 * const devnet = await startDevnet();
 * console.log(devnet.evm.rpcUrl, devnet.evm.usdc);
 * await devnet.stop();
 * ```
 */
export async function startDevnet(options: DevnetOptions = {}): Promise<Devnet> {
  const evm: LocalEvmChain = await startEvmChain({
    chainId: options.evmChainId ?? DEVNET_EVM_CHAIN_ID,
    initialUsdc: options.evmTreasuryUsdc ?? 1_000_000_000n * 10n ** 6n,
    ...(options.evmPort === undefined ? {} : { port: options.evmPort }),
  });
  let stopping: Promise<void> | undefined;
  return {
    evm: {
      rpcUrl: evm.rpcUrl,
      chainId: evm.chainId,
      usdc: getAddress(evm.usdc),
      usdcEip712: { ...USDC_EIP712 },
    },
    treasury: { evm: { address: EVM_TREASURY_ADDRESS, privateKey: EVM_TREASURY_PRIVATE_KEY } },
    stop() {
      stopping ??= evm.stop();
      return stopping;
    },
  };
}
