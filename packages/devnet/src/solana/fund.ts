import {
  type Address,
  createKeyPairSignerFromBytes,
  createSolanaRpc,
  getBase64Decoder,
  type Instruction,
  type Signature,
  type TransactionSigner,
} from "@solana/kit";
import { getTransferSolInstruction } from "@solana-program/system";
import {
  findAssociatedTokenPda,
  getCreateAssociatedTokenIdempotentInstruction,
  getTransferCheckedInstruction,
  TOKEN_PROGRAM_ADDRESS,
} from "@solana-program/token";
import { SOLANA_USDC_DECIMALS } from "./chain.ts";
import { buildSignedTransaction } from "./transactions.ts";

/** What {@link fundSolana} needs to know about a devnet (a started devnet or the JSON `svc-devnet` prints). */
export interface SolanaFundingSource {
  readonly solana: { readonly rpcUrl: string; readonly usdcMint: string };
  readonly treasury: { readonly solana: { readonly secretKey: Uint8Array | readonly number[] } };
}

/** Amounts in atomic units: lamports for SOL, 10^-6 USDC for USDC. */
export interface SolanaFundingAmounts {
  readonly sol?: bigint;
  readonly usdc?: bigint;
}

/** Signatures of the transactions {@link fundSolana} sent, each confirmed without error. */
export interface SolanaFundingReceipt {
  readonly solTx?: Signature;
  readonly usdcTx?: Signature;
}

const COMPUTE_BUDGET_PROGRAM = "ComputeBudget111111111111111111111111111111" as Address;
let uniquifier = 0;

/**
 * A SetComputeUnitLimit instruction with a per-call limit: two identical transfers in the same slot would
 * otherwise be the same transaction (same signature) and the second would be rejected as AlreadyProcessed.
 */
function uniqueComputeLimit(): Instruction {
  uniquifier = (uniquifier + 1) % 100_000;
  const data = new Uint8Array(5);
  data[0] = 2;
  new DataView(data.buffer).setUint32(1, 300_000 + uniquifier, true);
  return { programAddress: COMPUTE_BUDGET_PROGRAM, accounts: [], data };
}

/**
 * Pays SOL and/or USDC from the Solana treasury to the wallet `to` with real transactions sent through the
 * devnet's JSON-RPC endpoint, and waits until they are confirmed. USDC goes to `to`'s associated token
 * account, created if missing (paid by the treasury).
 *
 * @example
 * ```ts
 * const devnet = await startDevnet();
 * await fundSolana(devnet, wallet.address, { sol: 1_000_000_000n, usdc: 5_000_000n });
 * ```
 */
export async function fundSolana(
  devnet: SolanaFundingSource,
  to: Address,
  amounts: SolanaFundingAmounts,
): Promise<SolanaFundingReceipt> {
  const mint = devnet.solana.usdcMint as Address;
  const result: { solTx?: Signature; usdcTx?: Signature } = {};
  if (amounts.sol !== undefined && amounts.sol > 0n) {
    const sol = amounts.sol;
    result.solTx = await sendFromSolanaTreasury(devnet, (treasury) => [
      getTransferSolInstruction({ source: treasury, destination: to, amount: sol }),
    ]);
  }
  if (amounts.usdc !== undefined && amounts.usdc > 0n) {
    const usdc = amounts.usdc;
    const tokenAccountOf = async (owner: Address) =>
      (await findAssociatedTokenPda({ owner, mint, tokenProgram: TOKEN_PROGRAM_ADDRESS }))[0];
    const destination = await tokenAccountOf(to);
    result.usdcTx = await sendFromSolanaTreasury(devnet, async (treasury) => [
      getCreateAssociatedTokenIdempotentInstruction({ payer: treasury, ata: destination, owner: to, mint }),
      getTransferCheckedInstruction({
        source: await tokenAccountOf(treasury.address),
        mint,
        destination,
        authority: treasury,
        amount: usdc,
        decimals: SOLANA_USDC_DECIMALS,
      }),
    ]);
  }
  return result;
}

/**
 * Sends one transaction of `instructions` paid (and signed) by the Solana treasury, with any other signer the
 * instructions carry (a new account's), and waits until it is confirmed without error.
 *
 * @example
 * ```ts
 * await sendFromSolanaTreasury(devnet, (treasury) => [
 *   getCreateAccountInstruction({ payer: treasury, newAccount, lamports, space, programAddress }),
 * ]);
 * ```
 */
export async function sendFromSolanaTreasury(
  devnet: SolanaFundingSource,
  instructions: (treasury: TransactionSigner) => Instruction[] | Promise<Instruction[]>,
): Promise<Signature> {
  const rpc = createSolanaRpc(devnet.solana.rpcUrl);
  const treasury = await treasurySigner(devnet);
  const { value: blockhash } = await rpc.getLatestBlockhash({ commitment: "confirmed" }).send();
  const wire = await buildSignedTransaction(treasury, blockhash, [
    uniqueComputeLimit(),
    ...(await instructions(treasury)),
  ]);
  const encoded = getBase64Decoder().decode(wire) as Parameters<typeof rpc.sendTransaction>[0];
  const signature = await rpc
    .sendTransaction(encoded, { encoding: "base64", preflightCommitment: "confirmed" })
    .send();
  await waitForConfirmation(rpc, signature);
  return signature;
}

function treasurySigner(devnet: SolanaFundingSource): Promise<TransactionSigner> {
  return createKeyPairSignerFromBytes(Uint8Array.from(devnet.treasury.solana.secretKey));
}

/**
 * Polls `getSignatureStatuses` until `signature` reaches `commitment` (default confirmed); throws if the
 * transaction failed or did not get there within `timeoutMs` (default 30 s).
 *
 * @example
 * ```ts
 * const signature = await rpc.sendTransaction(wire, { encoding: "base64" }).send();
 * await waitForConfirmation(rpc, signature, { commitment: "finalized" });
 * ```
 */
export async function waitForConfirmation(
  rpc: ReturnType<typeof createSolanaRpc>,
  signature: Signature,
  options: { commitment?: "confirmed" | "finalized"; timeoutMs?: number } = {},
): Promise<void> {
  const wanted = options.commitment ?? "confirmed";
  const deadline = Date.now() + (options.timeoutMs ?? 30_000);
  for (;;) {
    const { value } = await rpc.getSignatureStatuses([signature]).send();
    const status = value[0];
    if (status?.err)
      throw new Error(
        `transaction ${signature} failed: ${JSON.stringify(status.err, (_k, v: unknown) => (typeof v === "bigint" ? v.toString() : v))}`,
      );
    const level = status?.confirmationStatus;
    if (level === "finalized" || (level === "confirmed" && wanted === "confirmed")) return;
    if (Date.now() > deadline) throw new Error(`transaction ${signature} not ${wanted} in time`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
