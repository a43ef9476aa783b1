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
import { and, eq, inArray } from "drizzle-orm";
import type { Logger } from "pino";
import { evmAddressOf } from "./chains/evm-keys.ts";
import type { FaucetAccounts } from "./faucet/faucet.ts";
import { type Config, ConfigError, type NetworkConfig } from "./internal/config.ts";
import { transactions } from "./internal/db/schema.ts";
import type { Db } from "./internal/db/store.ts";
import { forgetCursors } from "./receives/watcher.ts";
import { failSpend } from "./spends/admission.ts";
import { forgetNonces } from "./spends/nonces.ts";

type DevnetModule = typeof import("@svc/devnet");

/** What the service is given when it serves the local chains. */
export interface LocalChains {
  /** The network configuration with the local chains' RPC URLs and token addresses filled in. */
  network: NetworkConfig;
  /** Fresh faucet accounts, topped up from the devnet treasury before their first payment. */
  faucet: FaucetAccounts;
  /**
   * The local x402 demo, when it runs: a paid resource (v2, and its v1 twin) and a facilitator settling
   * on the devnet and listing it in discovery.
   */
  x402Demo?: { url: string; v1Url: string; facilitatorUrl: string };
  /**
   * True when this wiring started the chains: they are new, whatever the store recorded of chains of the
   * same names before (`npm start` again on one data directory). See {@link forgetRestartedChains}.
   */
  fresh: boolean;
  /** Stops the devnet and the demo if this wiring started them; a devnet handed in is left running. */
  stop(): Promise<void>;
}

/** What a faucet account gets from the treasury on first use: 100 ETH / 1,000 SOL and 1,000,000 USDC. */
const FAUCET_FLOAT = { eth: 100n * 10n ** 18n, sol: 1_000n * 10n ** 9n, usdc: 1_000_000n * 10n ** 6n };

/** Whether the configuration serves local chains: the devnet profile without RPC URLs of a devnet run elsewhere. */
function servesLocalChains(config: Config): boolean {
  const { profile, rpcUrls } = config.network;
  return profile === "devnet" && !rpcUrls.base && !rpcUrls.solana;
}

/**
 * Whether {@link openLocalChains} starts chains of its own (new ones, whatever the store recorded of chains
 * of the same names): the configuration serves local chains and no devnet is handed in.
 */
export function startsOwnChains(config: Config, devnet?: DevnetInfo): boolean {
  return servesLocalChains(config) && devnet === undefined;
}

/**
 * The local chains to serve, or undefined when the configuration points elsewhere (another profile, or RPC
 * URLs of a devnet run separately). On the devnet profile without RPC URLs, uses `devnet` when given
 * (tests share one per file) and otherwise starts one.
 * @example
 * const local = await openLocalChains(config);
 * const network = local?.network ?? config.network;
 */
export async function openLocalChains(
  config: Config,
  devnet?: DevnetInfo,
  options: { x402Demo?: boolean } = {},
): Promise<LocalChains | undefined> {
  const network = config.network;
  if (!servesLocalChains(config)) return undefined;
  const { startDevnet, fundEvm, fundSolana } = await loadDevnet();
  const started = devnet ? undefined : await startDevnet();
  const chains: DevnetInfo = devnet ?? (started as DevnetInfo);
  let demo: Awaited<ReturnType<typeof import("@svc/x402-local").startLocalDemo>> | undefined;
  try {
    // `npm start`'s own chains get the demo; tests sharing a devnet ask for it.
    if (options.x402Demo ?? started !== undefined) {
      const { startLocalDemo } = await import("@svc/x402-local");
      demo = await startLocalDemo(chains);
    }
    return {
      network: {
        ...network,
        rpcUrls: { ...network.rpcUrls, base: chains.evm.rpcUrl, solana: chains.solana.rpcUrl },
        usdcAddresses: { ...network.usdcAddresses, base: chains.evm.usdc, solana: chains.solana.usdcMint },
      },
      faucet: await freshFaucetAccounts(chains, { fundEvm, fundSolana }),
      fresh: started !== undefined,
      ...(demo
        ? { x402Demo: { url: demo.url, v1Url: demo.v1Url, facilitatorUrl: demo.facilitator.url } }
        : {}),
      stop: async () => {
        await demo?.stop();
        await started?.stop();
      },
    };
  } catch (error) {
    await demo?.stop();
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
  const evmAddress = evmAddressOf(evmKey);
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

/**
 * Drops what the store knew of chains that were started anew under the same names (`npm start` again on one
 * data directory: "the local chains start fresh, the history stays"): the EVM nonces handed out on them
 * (kept, the next send was signed with a nonce the new chain is far from, and waited for good), the scan
 * cursors (the new chain is scanned from its head), and spends still pending on them, which end failed, their
 * room in the daily limit given back: the chain they were sent on is gone. Recorded history stays as it is.
 */
export async function forgetRestartedChains(db: Db, chains: readonly string[], log: Logger): Promise<void> {
  if (chains.length === 0) return;
  await forgetNonces(db, chains);
  await forgetCursors(db, chains);
  const pending = await db
    .select({ id: transactions.id })
    .from(transactions)
    .where(
      and(
        inArray(transactions.chain, [...chains]),
        eq(transactions.status, "pending"),
        inArray(transactions.type, ["send", "x402"]),
      ),
    );
  for (const { id } of pending) await failSpend(db, id, "the local chain it was sent on was started anew");
  if (pending.length > 0)
    log.warn({ failed: pending.length }, "spends pending on the previous local chains ended failed");
}
