/**
 * Building and signing x402 `exact` payments with a wallet's key, and the headers that carry them. Signing
 * makes no network call: what it needs from a chain (a Solana blockhash) is read before and passed in, so
 * the caller can reserve and record the payment first and sign last.
 */
import { randomBytes, randomInt } from "node:crypto";
import {
  type Address,
  appendTransactionMessageInstructions,
  type Blockhash,
  createKeyPairSignerFromPrivateKeyBytes,
  createTransactionMessage,
  getBase58Decoder,
  getBase64EncodedWireTransaction,
  type Instruction,
  partiallySignTransactionMessageWithSigners,
  pipe,
  setTransactionMessageFeePayer,
  setTransactionMessageLifetimeUsingBlockhash,
  address as toSolanaAddress,
} from "@solana/kit";
import {
  findAssociatedTokenPda,
  getTransferCheckedInstruction,
  TOKEN_PROGRAM_ADDRESS,
} from "@solana-program/token";
import { getAddress, type Hex, toHex } from "viem";
import { evmAddressOf, signEvmTypedData } from "../chains/evm-keys.ts";
import { errors } from "../internal/errors.ts";
import type { PaymentChallenge, SelectedRequirement } from "./challenge.ts";
import { encodeHeaderJson } from "./encoding.ts";
import { evmChainId } from "./networks.ts";

/** The request header a payment travels in, by the challenge's version. */
export const PAYMENT_HEADER = { 1: "X-PAYMENT", 2: "PAYMENT-SIGNATURE" } as const;

/**
 * Signed authorizations are good for at most this long, whatever the server asks: a payment is either
 * settled or known to be dead within it (its EVM `validBefore`), so a pending record never waits longer.
 */
export const MAX_PAYMENT_LIFETIME_SECONDS = 3600;
/** EVM `validAfter` lies this far in the past, so a facilitator whose clock is behind ours still settles. */
const VALID_AFTER_SKEW_SECONDS = 600;

/** What to look for on chain when no receipt tells how a payment ended. */
export type PaymentOnChain =
  | {
      kind: "evm";
      /** The token whose `authorizationState(authorizer, nonce)` turns true once settled. */
      token: `0x${string}`;
      authorizer: `0x${string}`;
      nonce: Hex;
      /** Unix seconds after which the authorization can never settle. */
      validBefore: bigint;
    }
  | {
      kind: "solana";
      /** The payer's signature: the settled transaction carries it next to the fee payer's. */
      payerSignature: string;
      /** The payer's token account, whose history holds the settled transaction. */
      sourceTokenAccount: Address;
      /** The block height after which the transaction can never land. */
      lastValidBlockHeight: bigint;
      /**
       * The slot the blockhash was read at (its answer's context slot): a slot already confirmed before the
       * transaction existed, so it cannot hold it. Absent from payments recorded before it was kept.
       */
      blockhashSlot?: bigint;
    };

/**
 * What makes a signed payment one payment, and the store records each once (`transactions.x402_payment_key`):
 * an EVM authorization's token, payer and nonce (it settles at most once), a Solana payment's payer signature
 * (it is in one transaction only).
 * @example paymentKeyOf(signed.onChain) // "solana:5VERv8NMvzbJMEkV8xnrLkEaWRtSz9CosKDYjCJjBRnbJLgp8uirBgmQpjKhoR4tjF3ZpRzrFmBV6UjKdiSZkQUW"
 */
export function paymentKeyOf(onChain: PaymentOnChain): string {
  return onChain.kind === "evm"
    ? `evm:${onChain.token.toLowerCase()}:${onChain.authorizer.toLowerCase()}:${onChain.nonce.toLowerCase()}`
    : `solana:${onChain.payerSignature}`;
}

/** A payment ready to send: the header to retry the request with, and what identifies it on chain. */
export interface SignedPayment {
  version: 1 | 2;
  header: { name: (typeof PAYMENT_HEADER)[1 | 2]; value: string };
  /** The paying address. */
  payer: string;
  onChain: PaymentOnChain;
}

/** A recent blockhash of a Solana chain, read before signing. */
export interface RecentBlockhash {
  blockhash: string;
  lastValidBlockHeight: bigint;
  /** The slot it was read at (the answer's context slot). */
  slot: bigint;
}

/** Input of {@link signPayment}. */
export interface SignPaymentInput {
  challenge: PaymentChallenge;
  selected: SelectedRequirement;
  /** EVM: the 32-byte secp256k1 secret. Solana: the 32-byte ed25519 seed. */
  privateKey: Uint8Array;
  /** The time the authorization is dated from (EVM `validAfter` / `validBefore`). */
  now: Date;
  /** Solana only: a recent blockhash of the chain (required there). */
  recentBlockhash?: RecentBlockhash;
}

/**
 * Builds and signs the `exact` payment of the selected requirement, and encodes the header of the
 * challenge's version: v1 `X-PAYMENT` `{ x402Version: 1, scheme, network, payload }`; v2 `PAYMENT-SIGNATURE`
 * `{ x402Version: 2, resource?, accepted, payload, extensions? }` with `accepted` the chosen `accepts` entry
 * verbatim (servers compare it deeply).
 *
 * EVM: an EIP-3009 `TransferWithAuthorization` of exactly the amount to `payTo`, EIP-712 domain `{ extra.name,
 * extra.version, chainId, verifyingContract: asset }`, a random nonce, valid from 10 minutes ago until
 * `maxTimeoutSeconds` (at most an hour) from now.
 * Solana: a v0 transaction with the facilitator (`extra.feePayer`) as fee payer — SetComputeUnitLimit of at most
 * 20,000 and different for each payment ({@link nextComputeUnitLimit}), SetComputeUnitPrice 1 microlamport,
 * TransferChecked of exactly the amount between the associated token accounts, a Memo (`extra.memo`, or 16
 * random bytes in hex) — signed by the payer only.
 *
 * @example
 * ```ts
 * const signed = await signPayment({ challenge, selected, privateKey, now: new Date() });
 * await outbound.fetch({ url, headers: { [signed.header.name]: signed.header.value } });
 * ```
 */
export async function signPayment(input: SignPaymentInput): Promise<SignedPayment> {
  const { challenge, selected } = input;
  const signed =
    selected.chain.kind === "evm"
      ? await signExactEvm(input)
      : await signExactSolana(input, input.recentBlockhash);
  const requirement = selected.requirement;
  const document =
    challenge.version === 1
      ? { x402Version: 1, scheme: requirement.scheme, network: requirement.network, payload: signed.payload }
      : {
          x402Version: 2,
          ...(challenge.resource === undefined ? {} : { resource: challenge.resource }),
          accepted: requirement.raw,
          payload: signed.payload,
          ...(challenge.extensions === undefined ? {} : { extensions: challenge.extensions }),
        };
  return {
    version: challenge.version,
    header: { name: PAYMENT_HEADER[challenge.version], value: encodeHeaderJson(document) },
    payer: signed.payer,
    onChain: signed.onChain,
  };
}

interface SchemePayment {
  payload: Record<string, unknown>;
  payer: string;
  onChain: PaymentOnChain;
}

const TRANSFER_WITH_AUTHORIZATION = {
  TransferWithAuthorization: [
    { name: "from", type: "address" },
    { name: "to", type: "address" },
    { name: "value", type: "uint256" },
    { name: "validAfter", type: "uint256" },
    { name: "validBefore", type: "uint256" },
    { name: "nonce", type: "bytes32" },
  ],
} as const;

async function signExactEvm(input: SignPaymentInput): Promise<SchemePayment> {
  const { requirement } = input.selected;
  if (input.privateKey.length !== 32) throw new Error("EVM private key must be 32 bytes");
  const chainId = evmChainId(requirement.caip2);
  if (chainId === undefined) throw new Error(`not an EVM network: ${requirement.caip2}`);
  const payer = evmAddressOf(input.privateKey);
  const now = BigInt(Math.floor(input.now.getTime() / 1000));
  const lifetime = Math.min(requirement.maxTimeoutSeconds, MAX_PAYMENT_LIFETIME_SECONDS);
  const token = getAddress(requirement.asset);
  const authorization = {
    from: payer,
    to: getAddress(requirement.payTo),
    value: requirement.amount,
    validAfter: now > VALID_AFTER_SKEW_SECONDS ? now - BigInt(VALID_AFTER_SKEW_SECONDS) : 0n,
    validBefore: now + BigInt(lifetime),
    nonce: toHex(randomBytes(32)),
  };
  const signature = signEvmTypedData(
    {
      domain: {
        name: String(requirement.extra.name),
        version: String(requirement.extra.version),
        chainId,
        verifyingContract: token,
      },
      types: TRANSFER_WITH_AUTHORIZATION,
      primaryType: "TransferWithAuthorization",
      message: authorization,
    },
    input.privateKey,
  );
  return {
    payload: {
      signature,
      authorization: {
        from: authorization.from,
        to: authorization.to,
        value: authorization.value.toString(),
        validAfter: authorization.validAfter.toString(),
        validBefore: authorization.validBefore.toString(),
        nonce: authorization.nonce,
      },
    },
    payer,
    onChain: {
      kind: "evm",
      token,
      authorizer: payer,
      nonce: authorization.nonce,
      validBefore: authorization.validBefore,
    },
  };
}

const COMPUTE_BUDGET_PROGRAM = toSolanaAddress("ComputeBudget111111111111111111111111111111");
const MEMO_PROGRAM = toSolanaAddress("MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr");
/** What the reference payer sets, and what facilitators accept (they cap the price at 5 lamports/CU). */
const COMPUTE_UNIT_LIMIT = 20_000;
const COMPUTE_UNIT_PRICE_MICROLAMPORTS = 1n;
/** How many compute-unit limits, from {@link COMPUTE_UNIT_LIMIT} down, payments take in turn. */
const COMPUTE_UNIT_LIMITS = 4_000;
let computeUnitLimitTurn = randomInt(COMPUTE_UNIT_LIMITS);

/**
 * The compute-unit limit of the next Solana payment: each payment this process signs takes the next of 4,000
 * limits from 20,000 down, starting at a random one. Two payments alike in every field (payee, amount, the
 * seller's memo) signed against one blockhash were otherwise one transaction, Ed25519 signatures being
 * deterministic: it settles once, while both records would claim it. Every limit leaves room to spare (the
 * transfer and a 256-byte memo take under 1,000 units on the local chain) and costs the fee payer the same
 * (1 microlamport per unit rounds up to 1 lamport). Instances sharing a store can still meet on one: the
 * store records each payment once (`transactions.x402_payment_key`).
 */
function nextComputeUnitLimit(): number {
  computeUnitLimitTurn = (computeUnitLimitTurn + 1) % COMPUTE_UNIT_LIMITS;
  return COMPUTE_UNIT_LIMIT - computeUnitLimitTurn;
}
const MAX_MEMO_BYTES = 256;

async function signExactSolana(
  input: SignPaymentInput,
  recentBlockhash: RecentBlockhash | undefined,
): Promise<SchemePayment> {
  const { requirement, token } = input.selected;
  if (input.privateKey.length !== 32) throw new Error("Solana private key must be a 32-byte seed");
  if (!recentBlockhash) throw new Error("a Solana payment needs a recent blockhash, read before signing");
  if (token.address === null) throw new Error("x402 pays tokens, not the native coin");
  const payer = await createKeyPairSignerFromPrivateKeyBytes(input.privateKey);
  const feePayer = toSolanaAddress(String(requirement.extra.feePayer));
  if (feePayer === payer.address) {
    // The wallet would pay the fees and hand over a fully signed transaction: not an x402 payment.
    throw errors.noPayableRequirement(
      "no_payable_requirement",
      "The challenge names the paying wallet itself as the fee payer",
      { feePayer },
    );
  }
  if (
    requirement.extra.tokenProgram !== undefined &&
    requirement.extra.tokenProgram !== TOKEN_PROGRAM_ADDRESS
  ) {
    throw errors.noPayableRequirement(
      "no_payable_requirement",
      `The challenge asks for token program ${String(requirement.extra.tokenProgram)}; ${token.symbol} on this chain is an SPL Token mint`,
      { tokenProgram: requirement.extra.tokenProgram },
    );
  }
  const mint = toSolanaAddress(token.address);
  const [source, destination] = await Promise.all([
    associatedTokenAccount(payer.address, mint),
    associatedTokenAccount(toSolanaAddress(requirement.payTo), mint),
  ]);
  const memo = memoBytes(requirement.extra.memo);
  const instructions: Instruction[] = [
    computeUnitLimit(nextComputeUnitLimit()),
    computeUnitPrice(COMPUTE_UNIT_PRICE_MICROLAMPORTS),
    getTransferCheckedInstruction({
      source,
      mint,
      destination,
      authority: payer,
      amount: requirement.amount,
      decimals: token.decimals,
    }),
    { programAddress: MEMO_PROGRAM, accounts: [], data: memo },
  ];
  if (instructions.some((instruction) => instruction.programAddress === feePayer)) {
    // A program cannot sign for the fees: no transaction can be built, let alone settled.
    throw errors.noPayableRequirement(
      "no_payable_requirement",
      "The challenge names a program the payment invokes as its fee payer",
      { feePayer },
    );
  }
  const message = pipe(
    createTransactionMessage({ version: 0 }),
    (m) => setTransactionMessageFeePayer(feePayer, m),
    (m) =>
      setTransactionMessageLifetimeUsingBlockhash(
        {
          blockhash: recentBlockhash.blockhash as Blockhash,
          lastValidBlockHeight: recentBlockhash.lastValidBlockHeight,
        },
        m,
      ),
    (m) => appendTransactionMessageInstructions(instructions, m),
  );
  const signed = await partiallySignTransactionMessageWithSigners(message);
  const payerSignature = signed.signatures[payer.address];
  if (!payerSignature) throw new Error("the payer's signature is missing from the signed transaction");
  return {
    payload: { transaction: getBase64EncodedWireTransaction(signed) },
    payer: payer.address,
    onChain: {
      kind: "solana",
      payerSignature: getBase58Decoder().decode(payerSignature),
      sourceTokenAccount: source,
      lastValidBlockHeight: recentBlockhash.lastValidBlockHeight,
      blockhashSlot: recentBlockhash.slot,
    },
  };
}

async function associatedTokenAccount(owner: Address, mint: Address): Promise<Address> {
  const [ata] = await findAssociatedTokenPda({ owner, mint, tokenProgram: TOKEN_PROGRAM_ADDRESS });
  return ata;
}

/** The seller's memo when it set one (facilitators check it), else 16 random bytes in hex (unique payments). */
function memoBytes(sellerMemo: unknown): Uint8Array {
  if (typeof sellerMemo === "string" && sellerMemo !== "") {
    const bytes = new TextEncoder().encode(sellerMemo);
    if (bytes.byteLength > MAX_MEMO_BYTES) {
      throw errors.noPayableRequirement(
        "no_payable_requirement",
        `The challenge's extra.memo is longer than ${MAX_MEMO_BYTES} bytes`,
        { memoBytes: bytes.byteLength },
      );
    }
    return bytes;
  }
  return new TextEncoder().encode(randomBytes(16).toString("hex"));
}

function computeUnitLimit(units: number): Instruction {
  const data = new Uint8Array(5);
  data[0] = 2;
  new DataView(data.buffer).setUint32(1, units, true);
  return { programAddress: COMPUTE_BUDGET_PROGRAM, accounts: [], data };
}

function computeUnitPrice(microLamports: bigint): Instruction {
  const data = new Uint8Array(9);
  data[0] = 3;
  new DataView(data.buffer).setBigUint64(1, microLamports, true);
  return { programAddress: COMPUTE_BUDGET_PROGRAM, accounts: [], data };
}
