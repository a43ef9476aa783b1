import {
  type Address,
  appendTransactionMessageInstructions,
  createKeyPairSignerFromBytes,
  createSolanaRpc,
  createTransactionMessage,
  getBase64EncodedWireTransaction,
  pipe,
  setTransactionMessageFeePayerSigner,
  setTransactionMessageLifetimeUsingBlockhash,
  signTransactionMessageWithSigners,
  address as toAddress,
} from "@solana/kit";
import {
  findAssociatedTokenPda,
  getCreateAssociatedTokenIdempotentInstruction,
  TOKEN_PROGRAM_ADDRESS,
} from "@solana-program/token";
import { type SolanaFundingSource, waitForConfirmation } from "@svc/devnet";

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
  const rpc = createSolanaRpc(devnet.solana.rpcUrl);
  const treasury = await createKeyPairSignerFromBytes(Uint8Array.from(devnet.treasury.solana.secretKey));
  const mint = toAddress(devnet.solana.usdcMint);
  const [ata] = await findAssociatedTokenPda({
    owner: toAddress(owner),
    mint,
    tokenProgram: TOKEN_PROGRAM_ADDRESS,
  });
  const { value: blockhash } = await rpc.getLatestBlockhash({ commitment: "confirmed" }).send();
  const message = pipe(
    createTransactionMessage({ version: 0 }),
    (m) => setTransactionMessageFeePayerSigner(treasury, m),
    (m) => setTransactionMessageLifetimeUsingBlockhash(blockhash, m),
    (m) =>
      appendTransactionMessageInstructions(
        [
          getCreateAssociatedTokenIdempotentInstruction({
            payer: treasury,
            ata,
            owner: toAddress(owner),
            mint,
          }),
        ],
        m,
      ),
  );
  const signed = await signTransactionMessageWithSigners(message);
  const signature = await rpc
    .sendTransaction(getBase64EncodedWireTransaction(signed), {
      encoding: "base64",
      preflightCommitment: "confirmed",
    })
    .send();
  await waitForConfirmation(rpc, signature);
  return ata;
}
