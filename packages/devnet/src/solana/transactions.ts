import {
  appendTransactionMessageInstructions,
  type Blockhash,
  createTransactionMessage,
  getTransactionEncoder,
  type Instruction,
  pipe,
  setTransactionMessageFeePayerSigner,
  setTransactionMessageLifetimeUsingBlockhash,
  signTransactionMessageWithSigners,
  type TransactionSigner,
} from "@solana/kit";

const encoder = getTransactionEncoder();

/**
 * Builds a v0 transaction paid by `feePayer` with `blockhash`, signs it with every signer its instructions
 * carry, and returns its wire bytes.
 */
export async function buildSignedTransaction(
  feePayer: TransactionSigner,
  blockhash: { blockhash: string; lastValidBlockHeight: bigint },
  instructions: readonly Instruction[],
): Promise<Uint8Array> {
  const message = pipe(
    createTransactionMessage({ version: 0 }),
    (m) => setTransactionMessageFeePayerSigner(feePayer, m),
    (m) =>
      setTransactionMessageLifetimeUsingBlockhash(
        { blockhash: blockhash.blockhash as Blockhash, lastValidBlockHeight: blockhash.lastValidBlockHeight },
        m,
      ),
    (m) => appendTransactionMessageInstructions(instructions, m),
  );
  const signed = await signTransactionMessageWithSigners(message);
  return new Uint8Array(encoder.encode(signed));
}
