import type { Address as SolanaAddress } from "@solana/kit";
import { type Address, getAddress } from "viem";
import { type LocalEvmChain, startEvmChain } from "./evm/chain.ts";
import { USDC_EIP712 } from "./evm/usdc.ts";
import { DEVNET_EVM_CHAIN_ID, EVM_TREASURY_ADDRESS, EVM_TREASURY_PRIVATE_KEY } from "./keys.ts";
import { type LocalSolanaChain, startSolanaChain } from "./solana/chain.ts";

/** Options for {@link startDevnet}. Every field has a default that suits tests. */
export interface DevnetOptions {
  /** EVM chain id; default 31337 (anvil's, no public network's). */
  readonly evmChainId?: number;
  /** anvil port; default 0 (a free port). */
  readonly evmPort?: number;
  /** USDC minted to the EVM treasury, atomic units; default 1e9 USDC. */
  readonly evmTreasuryUsdc?: bigint;
  /** Solana JSON-RPC port; default 0 (a free port). */
  readonly solanaPort?: number;
  /** Milliseconds per Solana slot; default 100 (a cluster: ~400). */
  readonly solanaSlotMs?: number;
  /** Slots until a Solana transaction is finalized; default 32, as on a cluster. */
  readonly solanaFinalityDepth?: number;
  /** Lamports of the Solana treasury; default 1,000,000 SOL. */
  readonly solanaTreasuryLamports?: bigint;
  /** USDC minted to the Solana treasury, atomic units; default 1e9 USDC. */
  readonly solanaTreasuryUsdc?: bigint;
}

/** Facts about a running devnet: plain data, also what `svc-devnet` prints as JSON. */
export interface DevnetInfo {
  readonly evm: {
    readonly rpcUrl: string;
    /** 31337 unless overridden: anvil's default, no public network's. */
    readonly chainId: number;
    /** Address of the USDC-like EIP-3009 token (Circle's FiatTokenV2_2, 6 decimals). */
    readonly usdc: Address;
    /** EIP-712 domain name and version of the token, as x402's `extra` carries them. */
    readonly usdcEip712: { readonly name: string; readonly version: string };
  };
  readonly solana: {
    /** JSON-RPC 2.0 over HTTP; use with `createSolanaRpc(rpcUrl)`. */
    readonly rpcUrl: string;
    /**
     * Websocket subscriptions (slot, signature, account) on the same port; use with
     * `createSolanaRpcSubscriptions(wsUrl)`.
     */
    readonly wsUrl: string;
    /** SPL Token (not Token-2022) mint of the USDC-like token, 6 decimals, treasury as mint authority. */
    readonly usdcMint: SolanaAddress;
  };
  /** LOCAL DEV KEYS, public and never valid on a public chain. */
  readonly treasury: {
    /** anvil's first dev account: holds ETH and USDC, owns and mints the token. */
    readonly evm: { readonly address: Address; readonly privateKey: `0x${string}` };
    /**
     * Holds SOL and USDC (in its associated token account) and is the mint authority. `secretKey` is the
     * 64-byte `solana-keygen` layout: `createKeyPairSignerFromBytes(secretKey)` gives a signer.
     */
    readonly solana: { readonly address: SolanaAddress; readonly secretKey: Uint8Array };
  };
}

/** A running devnet. */
export interface Devnet extends DevnetInfo {
  /**
   * Moves the Solana cluster forward `count` slots at once (each with a new blockhash): ages blockhashes
   * (a blockhash expires after 150 slots) and advances commitment levels without waiting.
   */
  advanceSolanaSlots(count: number): void;
  /** Stops anvil and the Solana RPC server. Safe to call more than once. */
  stop(): Promise<void>;
}

/**
 * Starts the local chains on 127.0.0.1 with free ports: anvil (cancun) with a USDC-like EIP-3009 token and
 * Multicall3, LiteSVM behind a Solana JSON-RPC endpoint with a USDC-like SPL mint, and a funded treasury on
 * each. anvil is killed when `stop()` is called and when this process exits or dies.
 *
 * @example
 * ```ts
 * const devnet = await startDevnet();
 * console.log(devnet.evm.rpcUrl, devnet.evm.usdc, devnet.solana.rpcUrl, devnet.solana.usdcMint);
 * await devnet.stop();
 * ```
 */
export async function startDevnet(options: DevnetOptions = {}): Promise<Devnet> {
  const [evmResult, solanaResult] = await Promise.allSettled([
    startEvmChain({
      chainId: options.evmChainId ?? DEVNET_EVM_CHAIN_ID,
      initialUsdc: options.evmTreasuryUsdc ?? 1_000_000_000n * 10n ** 6n,
      ...(options.evmPort === undefined ? {} : { port: options.evmPort }),
    }),
    startSolanaChain({
      treasuryLamports: options.solanaTreasuryLamports ?? 1_000_000n * 10n ** 9n,
      treasuryUsdc: options.solanaTreasuryUsdc ?? 1_000_000_000n * 10n ** 6n,
      ...(options.solanaPort === undefined ? {} : { port: options.solanaPort }),
      ...(options.solanaSlotMs === undefined ? {} : { slotMs: options.solanaSlotMs }),
      ...(options.solanaFinalityDepth === undefined ? {} : { finalityDepth: options.solanaFinalityDepth }),
    }),
  ]);
  if (evmResult.status === "rejected" || solanaResult.status === "rejected") {
    if (evmResult.status === "fulfilled") await evmResult.value.stop();
    if (solanaResult.status === "fulfilled") await solanaResult.value.stop();
    throw evmResult.status === "rejected" ? evmResult.reason : (solanaResult as PromiseRejectedResult).reason;
  }
  const evm: LocalEvmChain = evmResult.value;
  const solana: LocalSolanaChain = solanaResult.value;
  let stopping: Promise<void> | undefined;
  return {
    evm: {
      rpcUrl: evm.rpcUrl,
      chainId: evm.chainId,
      usdc: getAddress(evm.usdc),
      usdcEip712: { ...USDC_EIP712 },
    },
    solana: { rpcUrl: solana.rpcUrl, wsUrl: solana.wsUrl, usdcMint: solana.usdcMint },
    treasury: {
      evm: { address: EVM_TREASURY_ADDRESS, privateKey: EVM_TREASURY_PRIVATE_KEY },
      solana: { address: solana.treasury.address, secretKey: solana.treasury.secretKey },
    },
    advanceSolanaSlots: (count) => solana.ledger.advanceSlots(count),
    stop() {
      stopping ??= Promise.all([evm.stop(), solana.stop()]).then(() => undefined);
      return stopping;
    },
  };
}
