import { randomBytes } from "node:crypto";
import { type Address, createKeyPairSignerFromPrivateKeyBytes } from "@solana/kit";
import type { DevnetInfo } from "@svc/devnet";
import { privateKeyToAddress } from "viem/accounts";
import { createChainClient, resolveChains } from "../../src/chains/registry.ts";
import type { ChainClient, SignedTransfer, TokenInfo } from "../../src/chains/types.ts";
import { loadConfig } from "../../src/internal/config.ts";

/** The chain-layer clients of a running devnet, built as the service builds them. */
export async function devnetClients(devnet: DevnetInfo): Promise<{ base: ChainClient; solana: ChainClient }> {
  const network = loadConfig({}).network;
  const configs = await resolveChains({
    ...network,
    rpcUrls: { base: devnet.evm.rpcUrl, solana: devnet.solana.rpcUrl },
    usdcAddresses: { base: devnet.evm.usdc, solana: devnet.solana.usdcMint },
  });
  const byName = new Map(configs.map((c) => [c.name, createChainClient(c)]));
  const base = byName.get("base");
  const solana = byName.get("solana");
  if (!base || !solana) throw new Error("devnet profile without base and solana");
  return { base, solana };
}

/** A fresh EVM key and its address. */
export function evmKey(): { privateKey: Buffer; address: `0x${string}` } {
  const privateKey = randomBytes(32);
  return { privateKey, address: privateKeyToAddress(`0x${privateKey.toString("hex")}`) };
}

/** A fresh Solana seed and its address. */
export async function solanaKey(): Promise<{ privateKey: Buffer; address: Address }> {
  const privateKey = randomBytes(32);
  return { privateKey, address: (await createKeyPairSignerFromPrivateKeyBytes(privateKey)).address };
}

/**
 * The mainnet profile's chain names and tokens with every RPC URL pointing at the local chains: for tests of
 * what a profile serves, which make no chain call that a local chain could not answer.
 */
export function mainnetProfileOnLocalChains(devnet: DevnetInfo): Record<string, string> {
  return {
    SVC_NETWORK_PROFILE: "mainnet",
    SVC_RPC_BASE: devnet.evm.rpcUrl,
    SVC_RPC_ETHEREUM: devnet.evm.rpcUrl,
    SVC_RPC_ARBITRUM: devnet.evm.rpcUrl,
    SVC_RPC_SOLANA: devnet.solana.rpcUrl,
  };
}

/** A transfer from `privateKey`'s address planned by the chain, then signed locally (EVM: at `nonce` when given). */
export async function signedTransfer(
  client: ChainClient,
  input: { privateKey: Uint8Array; to: string; token: TokenInfo; amount: bigint; nonce?: number },
): Promise<SignedTransfer> {
  const from =
    client.config.kind === "evm"
      ? privateKeyToAddress(`0x${Buffer.from(input.privateKey).toString("hex")}`)
      : (await createKeyPairSignerFromPrivateKeyBytes(input.privateKey)).address;
  const plan = await client.planTransfer({ from, to: input.to, token: input.token, amount: input.amount });
  return client.signTransfer(plan, input.privateKey, input.nonce);
}
