import { type Address, address as toAddress } from "@solana/kit";
import {
  findAssociatedTokenPda,
  getCreateAssociatedTokenIdempotentInstruction,
  TOKEN_PROGRAM_ADDRESS,
} from "@solana-program/token";
import { type SolanaFundingSource, sendFromSolanaTreasury } from "@svc/devnet";

/**
 * Creates `owner`'s associated token account of the devnet's USDC (paid by the treasury), empty, if it does
 * not exist yet, and returns its address. x402's `exact` scheme on Solana never creates the payee's token
 * account: a payment to an owner without one fails at simulation (`InvalidAccountData`).
 *
 * @example
 * ```ts
 * await createUsdcAccount(devnet, payTo); // "7xKX…" (the ATA), ready to receive
 * ```
 */
export async function createUsdcAccount(devnet: SolanaFundingSource, owner: string): Promise<Address> {
  const mint = toAddress(devnet.solana.usdcMint);
  const [ata] = await findAssociatedTokenPda({
    owner: toAddress(owner),
    mint,
    tokenProgram: TOKEN_PROGRAM_ADDRESS,
  });
  await sendFromSolanaTreasury(devnet, (treasury) => [
    getCreateAssociatedTokenIdempotentInstruction({ payer: treasury, ata, owner: toAddress(owner), mint }),
  ]);
  return ata;
}
