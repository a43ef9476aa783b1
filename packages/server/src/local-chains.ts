/**
 * Start-up wiring for the embedded default: the local chains of `@svc/devnet`. With `startService` and the
 * tests, the only code that knows the devnet exists; everything else sees chain names, RPC URLs and keys.
 *
 * `@svc/devnet` (anvil, LiteSVM) is a development dependency: it is loaded only when the devnet profile
 * starts local chains, so a production install without it serves the other profiles, or a devnet run
 * elsewhere, unchanged.
 */
import { randomBytes } from "node:crypto";
import { createKeyPairSignerFromPrivateKeyBytes } from "@solana/kit";
import type { DevnetInfo } from "@svc/devnet";
import { privateKeyToAddress } from "viem/accounts";
import type { FaucetAccounts } from "./faucet/faucet.ts";
import { type Config, ConfigError, type NetworkConfig } from "./internal/config.ts";

type DevnetModule = typeof import("@svc/devnet");

/** What the service is given when it serves the local chains. */
export interface LocalChains {
  /** The network configuration with the local chains' RPC URLs and token addresses filled in. */
  network: NetworkConfig;
  /** Fresh faucet accounts, topped up from the devnet treasury before their first payment. */
  faucet: FaucetAccounts;
  /** Stops the devnet if this wiring started it; a devnet handed in is left running. */
  stop(): Promise<void>;
}

/** What a faucet account gets from the treasury on first use: 100 ETH / 1,000 SOL and 1,000,000 USDC. */
const FAUCET_FLOAT = { eth: 100n * 10n ** 18n, sol: 1_000n * 10n ** 9n, usdc: 1_000_000n * 10n ** 6n };

/**
 * The local chains to serve, or undefined when the configuration points elsewhere (another profile, or RPC
 * URLs of a devnet run separately). On the devnet profile without RPC URLs, uses `devnet` when given
 * (tests share one per file) and otherwise starts one.
 * @example
 * const local = await openLocalChains(config);
 * const network = local?.network ?? config.network;
 */
export async function openLocalChains(config: Config, devnet?: DevnetInfo): Promise<LocalChains | undefined> {
  const network = config.network;
  if (network.profile !== "devnet" || network.rpcUrls.base || network.rpcUrls.solana) return undefined;
  const { startDevnet, fundEvm, fundSolana } = await loadDevnet();
  const started = devnet ? undefined : await startDevnet();
  const chains: DevnetInfo = devnet ?? (started as DevnetInfo);
  try {
    return {
      network: {
        ...network,
        rpcUrls: { ...network.rpcUrls, base: chains.evm.rpcUrl, solana: chains.solana.rpcUrl },
        usdcAddresses: { ...network.usdcAddresses, base: chains.evm.usdc, solana: chains.solana.usdcMint },
      },
      faucet: await freshFaucetAccounts(chains, { fundEvm, fundSolana }),
      stop: async () => {
        await started?.stop();
      },
    };
  } catch (error) {
    await started?.stop();
    throw error;
  }
}

/**
 * New keys for the faucet of this process, funded from the treasury on first use. The faucet then sends
 * from keys no other code uses, so its EVM nonces never race the treasury's other transfers.
 */
async function freshFaucetAccounts(
  devnet: DevnetInfo,
  { fundEvm, fundSolana }: Pick<DevnetModule, "fundEvm" | "fundSolana">,
): Promise<FaucetAccounts> {
  const evmKey = randomBytes(32);
  const solanaSeed = randomBytes(32);
  const evmAddress = privateKeyToAddress(`0x${evmKey.toString("hex")}`);
  const solanaAddress = (await createKeyPairSignerFromPrivateKeyBytes(solanaSeed)).address;
  return {
    evm: {
      privateKey: evmKey,
      prepare: async () => {
        await fundEvm(devnet, evmAddress, { eth: FAUCET_FLOAT.eth, usdc: FAUCET_FLOAT.usdc });
      },
    },
    solana: {
      privateKey: solanaSeed,
      prepare: async () => {
        await fundSolana(devnet, solanaAddress, { sol: FAUCET_FLOAT.sol, usdc: FAUCET_FLOAT.usdc });
      },
    },
  };
}

/** `@svc/devnet`, or a one-line configuration error saying what to do when this install lacks it. */
async function loadDevnet(): Promise<DevnetModule> {
  try {
    // Resolved first, so that only the package itself missing (not a fault inside it) reads as "not installed".
    import.meta.resolve("@svc/devnet");
  } catch {
    throw new ConfigError(
      "SVC_NETWORK_PROFILE=devnet starts local chains from @svc/devnet, which this install lacks (a production install omits it): install the workspace with its development dependencies, or set SVC_RPC_BASE and SVC_RPC_SOLANA (with SVC_USDC_BASE and SVC_USDC_SOLANA) to a devnet run elsewhere, or choose SVC_NETWORK_PROFILE=testnet or mainnet",
    );
  }
  return import("@svc/devnet");
}
