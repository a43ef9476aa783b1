import { randomBytes } from "node:crypto";
import {
  type Address,
  address,
  createKeyPairSignerFromPrivateKeyBytes,
  createSolanaRpc,
  generateKeyPairSigner,
  getAddressEncoder,
} from "@solana/kit";
import { getCreateAccountInstruction } from "@solana-program/system";
import {
  findAssociatedTokenPda,
  getBurnCheckedInstruction,
  getCloseAccountInstruction,
  getInitializeMint2Instruction,
  getInitializeMultisig2Instruction,
  getMintSize,
  getMultisigSize,
  TOKEN_PROGRAM_ADDRESS,
} from "@solana-program/token";
import { type DevnetInfo, sendFromSolanaTreasury } from "@svc/devnet";
import { privateKeyToAddress } from "viem/accounts";
import { createChainClient, resolveChains } from "../../src/chains/registry.ts";
import type { ChainClient, SignedTransfer, TokenInfo } from "../../src/chains/types.ts";
import { loadConfig } from "../../src/internal/config.ts";
import { usdMicros } from "../../src/policy/pricing.ts";

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

/**
 * The testnet profile with its chains on the local ones (`base-sepolia` on the devnet's anvil, which must run
 * with Base Sepolia's chain id 84532; `solana-devnet` on its Solana runtime) and their USDC: a profile that
 * prices nothing but USDC, and whose network ids the x402 reference packages know.
 */
export function testnetProfileOnLocalChains(devnet: DevnetInfo): Record<string, string> {
  return {
    SVC_NETWORK_PROFILE: "testnet",
    SVC_RPC_BASE_SEPOLIA: devnet.evm.rpcUrl,
    SVC_USDC_BASE_SEPOLIA: devnet.evm.usdc,
    SVC_RPC_SOLANA_DEVNET: devnet.solana.rpcUrl,
    SVC_USDC_SOLANA_DEVNET: devnet.solana.usdcMint,
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

/**
 * A new account of the SPL Token program, made and paid for by the devnet's Solana treasury: a mint (6
 * decimals, the treasury its authority) or a 1-of-1 multisig (a valid owner of token accounts).
 */
export async function createTokenProgramAccount(
  devnet: DevnetInfo,
  kind: "mint" | "multisig",
): Promise<Address> {
  const account = await generateKeyPairSigner();
  const space = BigInt(kind === "mint" ? getMintSize() : getMultisigSize());
  const lamports = await createSolanaRpc(devnet.solana.rpcUrl)
    .getMinimumBalanceForRentExemption(space)
    .send();
  await sendFromSolanaTreasury(devnet, (treasury) => [
    getCreateAccountInstruction({
      payer: treasury,
      newAccount: account,
      lamports,
      space,
      programAddress: TOKEN_PROGRAM_ADDRESS,
    }),
    kind === "mint"
      ? getInitializeMint2Instruction({ mint: account.address, decimals: 6, mintAuthority: treasury.address })
      : getInitializeMultisig2Instruction({ multisig: account.address, signers: [treasury.address], m: 1 }),
  ]);
  return account.address;
}

/** The rent of an SPL token account (165 bytes) in USD micros at `native`'s price: what a send opening one counts. */
export async function tokenAccountRentUsd(devnet: DevnetInfo, native: TokenInfo): Promise<bigint> {
  const lamports = await createSolanaRpc(devnet.solana.rpcUrl).getMinimumBalanceForRentExemption(165n).send();
  const micros = usdMicros(native, lamports);
  if (micros === undefined) throw new Error(`no USD price for ${native.symbol}`);
  return micros;
}

/**
 * Empties `owner`'s account of `token` (burning what it holds) and closes it, as its owner can at any time,
 * taking the rent back; returns the account's address.
 */
export async function closeTokenAccount(
  devnet: DevnetInfo,
  owner: { privateKey: Uint8Array; address: Address },
  token: TokenInfo,
): Promise<Address> {
  const mint = address(token.address ?? "");
  const [account] = await findAssociatedTokenPda({
    owner: owner.address,
    mint,
    tokenProgram: TOKEN_PROGRAM_ADDRESS,
  });
  const { value } = await createSolanaRpc(devnet.solana.rpcUrl).getTokenAccountBalance(account).send();
  const secretKey = new Uint8Array([...owner.privateKey, ...getAddressEncoder().encode(owner.address)]);
  await sendFromSolanaTreasury({ solana: devnet.solana, treasury: { solana: { secretKey } } }, (signer) => [
    getBurnCheckedInstruction({
      account,
      mint,
      authority: signer,
      amount: BigInt(value.amount),
      decimals: token.decimals,
    }),
    getCloseAccountInstruction({ account, destination: owner.address, owner: signer }),
  ]);
  return account;
}
