import {
  type Address,
  createKeyPairSignerFromBytes,
  type createSolanaRpc,
  getBase64Decoder,
  type Instruction,
  type KeyPairSigner,
  type Signature,
  type TransactionSigner,
} from "@solana/kit";
import { findAssociatedTokenPda, TOKEN_PROGRAM_ADDRESS } from "@solana-program/token";
import type { Devnet } from "../src/index.ts";
import { buildSignedTransaction } from "../src/solana/transactions.ts";

/** The kit RPC client type. */
export type Rpc = ReturnType<typeof createSolanaRpc>;

/** The Solana treasury as a kit signer. */
export function treasurySigner(devnet: Devnet): Promise<KeyPairSigner> {
  return createKeyPairSignerFromBytes(devnet.treasury.solana.secretKey);
}

/** Associated (SPL Token) USDC account of `owner`. */
export async function usdcAta(devnet: Devnet, owner: Address): Promise<Address> {
  const [ata] = await findAssociatedTokenPda({
    owner,
    mint: devnet.solana.usdcMint,
    tokenProgram: TOKEN_PROGRAM_ADDRESS,
  });
  return ata;
}

/** Signs a v0 transaction with a fresh confirmed blockhash (or the given one); returns base64 wire bytes. */
export async function signedBase64(
  rpc: Rpc,
  feePayer: TransactionSigner,
  instructions: readonly Instruction[],
  blockhash?: { blockhash: string; lastValidBlockHeight: bigint },
): Promise<Parameters<Rpc["sendTransaction"]>[0]> {
  const lifetime = blockhash ?? (await rpc.getLatestBlockhash({ commitment: "confirmed" }).send()).value;
  const wire = await buildSignedTransaction(feePayer, lifetime, instructions);
  return getBase64Decoder().decode(wire) as Parameters<Rpc["sendTransaction"]>[0];
}

/** Sends base64 wire bytes with preflight at `confirmed`. */
export function send(rpc: Rpc, base64: Parameters<Rpc["sendTransaction"]>[0]): Promise<Signature> {
  return rpc.sendTransaction(base64, { encoding: "base64", preflightCommitment: "confirmed" }).send();
}

/** Flips one bit of the first signature of a base64 wire transaction. */
export function corruptFirstSignature(
  base64: Parameters<Rpc["sendTransaction"]>[0],
): Parameters<Rpc["sendTransaction"]>[0] {
  const bytes = Buffer.from(base64, "base64");
  bytes[1] = (bytes[1] ?? 0) ^ 0x01;
  return bytes.toString("base64") as Parameters<Rpc["sendTransaction"]>[0];
}

/** Catches the rejection of `promise` (fails the test if it resolves). */
export async function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  throw new Error("expected the promise to reject");
}

/** POSTs a raw JSON-RPC body and returns the parsed reply. */
export async function rawRpc(url: string, body: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  return (await res.json()) as Record<string, unknown>;
}
