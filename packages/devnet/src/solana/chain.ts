import {
  type Address,
  createKeyPairSignerFromPrivateKeyBytes,
  getAddressEncoder,
  type KeyPairSigner,
} from "@solana/kit";
import { getCreateAccountInstruction, getTransferSolInstruction } from "@solana-program/system";
import {
  findAssociatedTokenPda,
  getCreateAssociatedTokenIdempotentInstruction,
  getInitializeMint2Instruction,
  getMintSize,
  getMintToCheckedInstruction,
  TOKEN_PROGRAM_ADDRESS,
} from "@solana-program/token";
import { SOLANA_FAUCET_SEED, SOLANA_TREASURY_SEED, SOLANA_USDC_MINT_SEED } from "../keys.ts";
import { type LedgerOptions, SolanaLedger } from "./ledger.ts";
import { startRpcServer } from "./server.ts";
import { buildSignedTransaction } from "./transactions.ts";

/** Decimals of the local SPL USDC mint. */
export const SOLANA_USDC_DECIMALS = 6;

/** The local Solana cluster as started by {@link startSolanaChain}. */
export interface LocalSolanaChain {
  readonly rpcUrl: string;
  readonly wsUrl: string;
  readonly usdcMint: Address;
  readonly treasury: { readonly address: Address; readonly secretKey: Uint8Array };
  readonly ledger: SolanaLedger;
  stop(): Promise<void>;
}

/** Options for {@link startSolanaChain}. */
export interface SolanaChainOptions extends LedgerOptions {
  readonly port?: number;
  /** Lamports the treasury starts with. */
  readonly treasuryLamports: bigint;
  /** USDC (atomic units) minted to the treasury's associated token account. */
  readonly treasuryUsdc: bigint;
}

/** 64-byte secret key in `solana-keygen` layout: the 32-byte seed, then the public key. */
function keypairBytes(seed: Uint8Array, address: Address): Uint8Array {
  const out = new Uint8Array(64);
  out.set(seed, 0);
  out.set(getAddressEncoder().encode(address), 32);
  return out;
}

async function signer(seed: Uint8Array): Promise<KeyPairSigner> {
  return createKeyPairSignerFromPrivateKeyBytes(seed, true);
}

/**
 * Starts LiteSVM behind a Solana JSON-RPC endpoint on 127.0.0.1, funds the treasury, and creates the
 * USDC-like mint (6 decimals, the treasury as mint authority) with real transactions, so they show up in
 * the treasury's history like on a cluster.
 */
export async function startSolanaChain(options: SolanaChainOptions): Promise<LocalSolanaChain> {
  const ledger = new SolanaLedger(options);
  const [faucet, treasury, mint] = await Promise.all([
    signer(SOLANA_FAUCET_SEED),
    signer(SOLANA_TREASURY_SEED),
    signer(SOLANA_USDC_MINT_SEED),
  ]);
  ledger.mintLamports(faucet.address, 10n ** 18n);

  const send = async (
    feePayer: KeyPairSigner,
    instructions: Parameters<typeof buildSignedTransaction>[2],
  ): Promise<string> => {
    const wire = await buildSignedTransaction(feePayer, ledger.latestBlockhash("processed"), instructions);
    return ledger.send(wire, { skipPreflight: false });
  };
  const airdrop = (to: string, lamports: bigint): Promise<string> =>
    send(faucet, [
      getTransferSolInstruction({ source: faucet, destination: to as Address, amount: lamports }),
    ]);

  try {
    await airdrop(treasury.address, options.treasuryLamports);
    const space = BigInt(getMintSize());
    const [ata] = await findAssociatedTokenPda({
      owner: treasury.address,
      mint: mint.address,
      tokenProgram: TOKEN_PROGRAM_ADDRESS,
    });
    await send(treasury, [
      getCreateAccountInstruction({
        payer: treasury,
        newAccount: mint,
        lamports: ledger.svm.minimumBalanceForRentExemption(space),
        space,
        programAddress: TOKEN_PROGRAM_ADDRESS,
      }),
      getInitializeMint2Instruction({
        mint: mint.address,
        decimals: SOLANA_USDC_DECIMALS,
        mintAuthority: treasury.address,
        freezeAuthority: treasury.address,
      }),
      getCreateAssociatedTokenIdempotentInstruction({
        payer: treasury,
        ata,
        owner: treasury.address,
        mint: mint.address,
      }),
      getMintToCheckedInstruction({
        mint: mint.address,
        token: ata,
        mintAuthority: treasury,
        amount: options.treasuryUsdc,
        decimals: SOLANA_USDC_DECIMALS,
      }),
    ]);
  } catch (err) {
    ledger.close();
    throw err;
  }

  const server = await startRpcServer({ ledger, airdrop }, options.port ?? 0);
  return {
    rpcUrl: server.url,
    wsUrl: server.wsUrl,
    usdcMint: mint.address,
    treasury: { address: treasury.address, secretKey: keypairBytes(SOLANA_TREASURY_SEED, treasury.address) },
    ledger,
    async stop() {
      ledger.close();
      await server.close();
    },
  };
}
