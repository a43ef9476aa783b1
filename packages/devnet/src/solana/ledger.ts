import { createPublicKey, verify as verifyEd25519 } from "node:crypto";
import { type Address, getBase58Decoder, getTransactionDecoder, type Lamports } from "@solana/kit";
import { type FailedTransactionMetadata, LiteSVM, type TransactionMetadata } from "litesvm";
import {
  landsOnChain,
  type TransactionErrorJson,
  transactionErrorJson,
  transactionErrorMessage,
} from "./errors.ts";
import { RPC_ERROR, RpcError } from "./rpc-error.ts";
import {
  decodeMint,
  decodeTokenAccount,
  isTokenProgram,
  SYSTEM_PROGRAM,
  type UiTokenAmount,
  uiTokenAmount,
} from "./token.ts";
import { MalformedTransactionError, parseWireTransaction, type WireTransaction } from "./wire.ts";

/** Commitment levels, as a cluster understands them. */
export type Commitment = "processed" | "confirmed" | "finalized";

/** Timing of the simulated cluster. */
export interface LedgerOptions {
  /** Milliseconds per slot (a new blockhash every slot). Default 100. */
  readonly slotMs?: number;
  /** Slots after which a landed transaction counts as finalized. Default 32, as on a cluster. */
  readonly finalityDepth?: number;
  /** Blocks a blockhash stays usable for (`lastValidBlockHeight - issued`). Default 150, as on a cluster. */
  readonly blockhashValidity?: number;
}

/** A token balance entry of a transaction's meta. */
export interface TokenBalance {
  readonly accountIndex: number;
  readonly mint: string;
  readonly owner: string;
  readonly programId: string;
  readonly uiTokenAmount: UiTokenAmount;
}

/** An inner instruction recorded during execution. */
export interface RecordedInnerInstruction {
  readonly programIdIndex: number;
  readonly accounts: readonly number[];
  readonly data: Uint8Array;
  readonly stackHeight: number;
}

/** A transaction the ledger committed to a slot, successful or failed during execution. */
export interface LandedTransaction {
  readonly signature: string;
  readonly slot: bigint;
  readonly blockTime: number;
  readonly wire: Uint8Array;
  readonly tx: WireTransaction;
  readonly err: TransactionErrorJson | null;
  readonly fee: bigint;
  readonly logs: readonly string[];
  readonly computeUnitsConsumed: bigint;
  readonly preBalances: readonly bigint[];
  readonly postBalances: readonly bigint[];
  readonly preTokenBalances: readonly TokenBalance[];
  readonly postTokenBalances: readonly TokenBalance[];
  readonly innerInstructions: ReadonlyArray<{
    readonly index: number;
    readonly instructions: readonly RecordedInnerInstruction[];
  }>;
}

/** Result of a simulation, in the cluster's terms. */
export interface SimulationOutcome {
  readonly err: TransactionErrorJson | null;
  readonly logs: readonly string[];
  readonly unitsConsumed: bigint;
  readonly returnData: { readonly programId: string; readonly data: Uint8Array } | null;
  /** Accounts as they would be after the transaction (only those it touched). */
  readonly postAccounts: ReadonlyMap<string, AccountSnapshot>;
  readonly innerInstructions: LandedTransaction["innerInstructions"];
}

/** An account's state. */
export interface AccountSnapshot {
  readonly lamports: bigint;
  readonly owner: string;
  readonly data: Uint8Array;
  readonly executable: boolean;
  readonly space: bigint;
}

const SPKI_ED25519_PREFIX = Buffer.from("302a300506032b6570032100", "hex");
const LAMPORTS_PER_SIGNATURE = 5000n;
const COMPUTE_BUDGET_PROGRAM = "ComputeBudget111111111111111111111111111111";
const transactionDecoder = getTransactionDecoder();
const base58Decoder = getBase58Decoder();

/** Verifies every required signature of `tx` over its message bytes (what a validator's sigverify does). */
export function signaturesAreValid(tx: WireTransaction): boolean {
  for (let i = 0; i < tx.header.numRequiredSignatures; i++) {
    const key = tx.accountKeyBytes[i];
    const signature = tx.signatureBytes[i];
    if (key === undefined || signature === undefined) return false;
    const publicKey = createPublicKey({
      key: Buffer.concat([SPKI_ED25519_PREFIX, key]),
      format: "der",
      type: "spki",
    });
    if (!verifyEd25519(null, tx.messageBytes, publicKey, signature)) return false;
  }
  return true;
}

function isFailure(
  result: TransactionMetadata | FailedTransactionMetadata,
): result is FailedTransactionMetadata {
  return "err" in result && typeof result.err === "function";
}

/**
 * A LiteSVM runtime with what a cluster adds around it: slots that advance on a timer, a window of recent
 * blockhashes, commitment levels, fees, and a record of every landed transaction (LiteSVM keeps no
 * signature history the RPC could answer from).
 */
export class SolanaLedger {
  readonly svm: LiteSVM;
  readonly slotMs: number;
  readonly finalityDepth: number;
  readonly blockhashValidity: number;
  private currentSlot = 1n;
  private readonly blockhashSlots = new Map<string, bigint>();
  private readonly slotBlockhashes = new Map<bigint, string>();
  private readonly slotTimes = new Map<bigint, number>();
  private readonly landed = new Map<string, LandedTransaction>();
  private readonly history: LandedTransaction[] = [];
  private readonly timer: NodeJS.Timeout;
  private transactionCount = 0n;
  private readonly listeners = new Set<() => void>();

  constructor(options: LedgerOptions = {}) {
    this.slotMs = options.slotMs ?? 100;
    this.finalityDepth = options.finalityDepth ?? 32;
    this.blockhashValidity = options.blockhashValidity ?? 150;
    // The ledger checks blockhash age itself, against a cluster-like window of recent blockhashes;
    // LiteSVM alone accepts only its single latest blockhash.
    this.svm = new LiteSVM().withBlockhashCheck(false);
    this.svm.warpToSlot(this.currentSlot);
    this.recordBlockhash();
    this.timer = setInterval(() => this.advanceSlots(1), this.slotMs);
    this.timer.unref();
  }

  /** Stops the slot timer. */
  close(): void {
    clearInterval(this.timer);
    this.listeners.clear();
  }

  /**
   * Calls `listener` whenever the ledger changes: a new slot, or a transaction landed. Returns an
   * unsubscribe function.
   */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private notify(): void {
    for (const listener of this.listeners) listener();
  }

  /** The newest (processed) slot. */
  get slot(): bigint {
    return this.currentSlot;
  }

  /** Moves the cluster forward `count` slots at once (each with a new blockhash). */
  advanceSlots(count: number): void {
    for (let i = 0; i < count; i++) {
      this.currentSlot += 1n;
      this.svm.warpToSlot(this.currentSlot);
      this.svm.expireBlockhash();
      this.recordBlockhash();
    }
    const clock = this.svm.getClock();
    clock.unixTimestamp = BigInt(Math.floor(Date.now() / 1000));
    this.svm.setClock(clock);
    const oldest = this.currentSlot - BigInt(this.blockhashValidity + this.finalityDepth + 10);
    for (const [slot, hash] of this.slotBlockhashes) {
      if (slot >= oldest) break;
      this.slotBlockhashes.delete(slot);
      this.blockhashSlots.delete(hash);
    }
    if (count > 0) this.notify();
  }

  private recordBlockhash(): void {
    const hash = this.svm.latestBlockhash();
    this.blockhashSlots.set(hash, this.currentSlot);
    this.slotBlockhashes.set(this.currentSlot, hash);
    this.slotTimes.set(this.currentSlot, Math.floor(Date.now() / 1000));
    this.slotTimes.delete(this.currentSlot - 100_000n);
  }

  /** Unix time at which `slot` was produced, if it is recent enough to be remembered. */
  blockTime(slot: bigint): number | undefined {
    return this.slotTimes.get(slot);
  }

  /** The newest slot at `commitment`: confirmed lags one slot, finalized `finalityDepth` slots. */
  slotAt(commitment: Commitment = "finalized"): bigint {
    const lag =
      commitment === "processed" ? 0n : commitment === "confirmed" ? 1n : BigInt(this.finalityDepth);
    const slot = this.currentSlot - lag;
    return slot < 1n ? 1n : slot;
  }

  /** Block height at `commitment` (this ledger skips no slots, so it equals the slot). */
  blockHeightAt(commitment: Commitment = "finalized"): bigint {
    return this.slotAt(commitment);
  }

  /** The blockhash of the newest block at `commitment`, with the last block height it is valid for. */
  latestBlockhash(commitment: Commitment = "finalized"): { blockhash: string; lastValidBlockHeight: bigint } {
    const slot = this.slotAt(commitment);
    const blockhash = this.slotBlockhashes.get(slot) ?? this.svm.latestBlockhash();
    const issued = this.blockhashSlots.get(blockhash) ?? this.currentSlot;
    return { blockhash, lastValidBlockHeight: issued + BigInt(this.blockhashValidity) };
  }

  /** Whether a transaction using `blockhash` would be accepted now. */
  isBlockhashValid(blockhash: string): boolean {
    const issued = this.blockhashSlots.get(blockhash);
    return issued !== undefined && this.currentSlot <= issued + BigInt(this.blockhashValidity);
  }

  /**
   * Whether `tx`'s lifetime is still good: a recent blockhash within the window, or — for a durable-nonce
   * transaction (first instruction AdvanceNonceAccount) — the nonce its nonce account currently stores.
   */
  lifetimeIsValid(tx: WireTransaction): boolean {
    if (this.isBlockhashValid(tx.recentBlockhash)) return true;
    const first = tx.instructions[0];
    if (first === undefined || tx.accountKeys[first.programIdIndex] !== SYSTEM_PROGRAM) return false;
    const view = new DataView(first.data.buffer, first.data.byteOffset, first.data.byteLength);
    if (first.data.length < 4 || view.getUint32(0, true) !== 4) return false;
    const nonceAccount = tx.accountKeys[first.accounts[0] ?? -1];
    const account = nonceAccount === undefined ? null : this.account(nonceAccount);
    if (account === null || account.owner !== SYSTEM_PROGRAM || account.data.length < 72) return false;
    return base58Decoder.decode(account.data.subarray(40, 72)) === tx.recentBlockhash;
  }

  /** Number of transactions processed (landed) so far. */
  get processedTransactionCount(): bigint {
    return this.transactionCount;
  }

  /** The fee a cluster charges for `tx`: 5000 lamports per signature plus the prioritization fee. */
  feeFor(tx: WireTransaction): bigint {
    let unitPrice = 0n;
    let unitLimit: bigint | undefined;
    let otherInstructions = 0n;
    for (const ix of tx.instructions) {
      if (tx.accountKeys[ix.programIdIndex] !== COMPUTE_BUDGET_PROGRAM) {
        otherInstructions += 1n;
        continue;
      }
      const view = new DataView(ix.data.buffer, ix.data.byteOffset, ix.data.byteLength);
      if (ix.data[0] === 2 && ix.data.length >= 5) unitLimit = BigInt(view.getUint32(1, true));
      if (ix.data[0] === 3 && ix.data.length >= 9) unitPrice = view.getBigUint64(1, true);
    }
    const limit = unitLimit ?? 200_000n * otherInstructions;
    const capped = limit > 1_400_000n ? 1_400_000n : limit;
    const priority = (unitPrice * capped + 999_999n) / 1_000_000n;
    return LAMPORTS_PER_SIGNATURE * BigInt(tx.header.numRequiredSignatures) + priority;
  }

  /** Current state of an account, or `null` if it does not exist. */
  account(address: string): AccountSnapshot | null {
    const account = this.svm.getAccount(address as Address);
    if (!account.exists) return null;
    return {
      lamports: account.lamports,
      owner: account.programAddress,
      data: account.data as Uint8Array,
      executable: account.executable,
      space: account.space,
    };
  }

  /** All accounts owned by `program`. */
  programAccounts(program: string): Array<{ address: string; account: AccountSnapshot }> {
    return this.svm.getProgramAccounts(program as Address).map((a) => ({
      address: a.address,
      account: {
        lamports: a.lamports,
        owner: a.programAddress,
        data: a.data as Uint8Array,
        executable: a.executable,
        space: a.space,
      },
    }));
  }

  /** A landed transaction by signature, if visible at `commitment`. */
  transaction(signature: string, commitment: Commitment = "finalized"): LandedTransaction | undefined {
    const found = this.landed.get(signature);
    return found !== undefined && found.slot <= this.slotAt(commitment) ? found : undefined;
  }

  /** Landed transactions, newest first, that reference `address`, visible at `commitment`. */
  transactionsFor(address: string, commitment: Commitment): LandedTransaction[] {
    const maxSlot = this.slotAt(commitment);
    const out: LandedTransaction[] = [];
    for (let i = this.history.length - 1; i >= 0; i--) {
      const t = this.history[i];
      if (t !== undefined && t.slot <= maxSlot && t.tx.accountKeys.includes(address)) out.push(t);
    }
    return out;
  }

  /** The commitment a slot has reached, and the cluster's `confirmations` count (null once finalized). */
  confirmationOf(slot: bigint): { status: Commitment; confirmations: number | null } {
    const depth = this.currentSlot - slot;
    if (depth >= BigInt(this.finalityDepth)) return { status: "finalized", confirmations: null };
    return { status: depth >= 1n ? "confirmed" : "processed", confirmations: Number(depth) };
  }

  /** Whether every required signature of `tx` verifies. */
  signaturesValid(tx: WireTransaction): boolean {
    return signaturesAreValid(tx);
  }

  /** Parses wire bytes, turning malformed input into the cluster's `-32602`. */
  parse(wire: Uint8Array): WireTransaction {
    try {
      return parseWireTransaction(wire);
    } catch (err) {
      if (err instanceof MalformedTransactionError) {
        throw new RpcError(RPC_ERROR.invalidParams, `invalid transaction: ${err.message}`);
      }
      throw err;
    }
  }

  private snapshotBalances(tx: WireTransaction): { lamports: bigint[]; tokens: TokenBalance[] } {
    const lamports: bigint[] = [];
    const tokens: TokenBalance[] = [];
    tx.accountKeys.forEach((key, accountIndex) => {
      const account = this.account(key);
      lamports.push(account?.lamports ?? 0n);
      if (account === null || !isTokenProgram(account.owner)) return;
      const state = decodeTokenAccount(account.owner, account.data);
      if (state === null) return;
      const mint = this.account(state.mint);
      const decimals = mint === null ? 0 : (decodeMint(mint.owner, mint.data)?.decimals ?? 0);
      tokens.push({
        accountIndex,
        mint: state.mint,
        owner: state.owner,
        programId: account.owner,
        uiTokenAmount: uiTokenAmount(state.amount, decimals),
      });
    });
    return { lamports, tokens };
  }

  /**
   * `simulateTransaction`: runs `tx` against the current state without committing it. Signatures are not
   * checked here (the RPC does that when asked to); the blockhash is unless `replaceRecentBlockhash`.
   */
  simulate(
    tx: WireTransaction,
    wire: Uint8Array,
    options: { replaceRecentBlockhash: boolean },
  ): SimulationOutcome {
    const empty = {
      logs: [],
      unitsConsumed: 0n,
      returnData: null,
      postAccounts: new Map(),
      innerInstructions: [],
    };
    if (!options.replaceRecentBlockhash && !this.lifetimeIsValid(tx)) {
      return { err: "BlockhashNotFound", ...empty };
    }
    if (this.landed.has(tx.signatures[0] ?? "")) return { err: "AlreadyProcessed", ...empty };
    const decoded = transactionDecoder.decode(wire);
    this.svm.withSigverify(false);
    let result: ReturnType<LiteSVM["simulateTransaction"]>;
    try {
      result = this.svm.simulateTransaction(decoded);
    } finally {
      this.svm.withSigverify(true);
    }
    if ("err" in result && typeof result.err === "function") {
      const failed = result as FailedTransactionMetadata;
      const meta = failed.meta();
      return {
        err: transactionErrorJson(failed),
        logs: meta.logs(),
        unitsConsumed: meta.computeUnitsConsumed(),
        returnData: null,
        postAccounts: new Map(),
        innerInstructions: recordInnerInstructions(meta),
      };
    }
    const info = result as Exclude<typeof result, FailedTransactionMetadata>;
    const meta = info.meta();
    const postAccounts = new Map<string, AccountSnapshot>();
    for (const a of info.postAccounts()) {
      postAccounts.set(a.address, {
        lamports: a.lamports,
        owner: a.programAddress,
        data: a.data as Uint8Array,
        executable: a.executable,
        space: a.space,
      });
    }
    const returned = meta.returnData();
    const returnData =
      returned.data().length > 0 ? { programId: bs58(returned.programId()), data: returned.data() } : null;
    return {
      err: null,
      logs: meta.logs(),
      unitsConsumed: meta.computeUnitsConsumed(),
      returnData,
      postAccounts,
      innerInstructions: recordInnerInstructions(meta),
    };
  }

  /**
   * `sendTransaction`: preflight (unless skipped) like a cluster, then execution and commitment to the
   * current slot. Returns the first signature. Transactions a cluster would drop (bad signature, unknown
   * blockhash, duplicate) are dropped when preflight is skipped: the signature never gets a status.
   */
  send(wire: Uint8Array, options: { skipPreflight: boolean }): string {
    const tx = this.parse(wire);
    const signature = tx.signatures[0] ?? "";
    if (!options.skipPreflight) {
      if (!signaturesAreValid(tx)) {
        throw new RpcError(
          RPC_ERROR.transactionSignatureVerificationFailure,
          "Transaction signature verification failure",
        );
      }
      const sim = this.simulate(tx, wire, { replaceRecentBlockhash: false });
      if (sim.err !== null) {
        throw new RpcError(
          RPC_ERROR.sendTransactionPreflightFailure,
          `Transaction simulation failed: ${transactionErrorMessage(sim.err)}`,
          {
            accounts: null,
            err: sim.err,
            innerInstructions: null,
            loadedAccountsDataSize: 0,
            logs: sim.logs,
            replacementBlockhash: null,
            returnData: null,
            unitsConsumed: sim.unitsConsumed,
          },
        );
      }
    } else if (!signaturesAreValid(tx) || !this.lifetimeIsValid(tx) || this.landed.has(signature)) {
      return signature;
    }
    this.execute(tx, wire);
    return signature;
  }

  private execute(tx: WireTransaction, wire: Uint8Array): LandedTransaction | undefined {
    const pre = this.snapshotBalances(tx);
    const result = this.svm.sendTransaction(transactionDecoder.decode(wire));
    let err: TransactionErrorJson | null = null;
    let meta: TransactionMetadata;
    if (isFailure(result)) {
      err = transactionErrorJson(result);
      if (!landsOnChain(err)) return undefined;
      meta = result.meta();
    } else {
      meta = result;
    }
    const post = this.snapshotBalances(tx);
    const innerInstructions = recordInnerInstructions(meta);
    const landed: LandedTransaction = {
      signature: tx.signatures[0] ?? "",
      slot: this.currentSlot,
      // Block time is per block: every transaction of a slot shares it.
      blockTime: this.slotTimes.get(this.currentSlot) ?? Math.floor(Date.now() / 1000),
      wire: Uint8Array.from(wire),
      tx,
      err,
      fee: this.feeFor(tx),
      logs: meta.logs(),
      computeUnitsConsumed: meta.computeUnitsConsumed(),
      preBalances: pre.lamports,
      postBalances: post.lamports,
      preTokenBalances: pre.tokens,
      postTokenBalances: post.tokens,
      innerInstructions,
    };
    this.landed.set(landed.signature, landed);
    this.history.push(landed);
    this.transactionCount += 1n;
    this.notify();
    return landed;
  }

  /** Creates a system account holding `amount` lamports out of thin air (used once, for the faucet). */
  mintLamports(address: string, amount: bigint): void {
    this.svm.setAccount({
      address: address as Address,
      lamports: amount as Lamports,
      programAddress: SYSTEM_PROGRAM as Address,
      data: new Uint8Array(0),
      executable: false,
      space: 0n,
    });
  }
}

/** LiteSVM's inner instructions, in the cluster's shape (top-level instructions without any left out). */
function recordInnerInstructions(meta: TransactionMetadata): LandedTransaction["innerInstructions"] {
  return meta
    .innerInstructions()
    .map((list, index) => ({
      index,
      instructions: list.map((inner) => {
        const ix = inner.instruction();
        return {
          programIdIndex: ix.programIdIndex(),
          accounts: Array.from(ix.accounts()),
          data: ix.data(),
          stackHeight: inner.stackHeight(),
        };
      }),
    }))
    .filter((entry) => entry.instructions.length > 0);
}

function bs58(bytes: Uint8Array): string {
  return base58Decoder.decode(bytes);
}
