import { randomInt } from "node:crypto";
import {
  type Address,
  appendTransactionMessageInstructions,
  type Base64EncodedWireTransaction,
  type Blockhash,
  createDefaultRpcTransport,
  createKeyPairSignerFromPrivateKeyBytes,
  type createSolanaRpc,
  createSolanaRpcFromTransport,
  createTransactionMessage,
  getBase64EncodedWireTransaction,
  getBase64Encoder,
  getCompiledTransactionMessageDecoder,
  getSignatureFromTransaction,
  getSolanaErrorFromJsonRpcError,
  getTransactionDecoder,
  type Instruction,
  isAddress,
  isSolanaError,
  pipe,
  type RpcTransport,
  type Signature,
  SOLANA_ERROR__JSON_RPC__INTERNAL_ERROR,
  SOLANA_ERROR__JSON_RPC__SERVER_ERROR_NODE_UNHEALTHY,
  SOLANA_ERROR__JSON_RPC__SERVER_ERROR_SEND_TRANSACTION_PREFLIGHT_FAILURE,
  SOLANA_ERROR__RPC__TRANSPORT_HTTP_ERROR,
  SOLANA_ERROR__TRANSACTION_ERROR__ALREADY_PROCESSED,
  SOLANA_ERROR__TRANSACTION_ERROR__BLOCKHASH_NOT_FOUND,
  setTransactionMessageFeePayerSigner,
  setTransactionMessageLifetimeUsingBlockhash,
  signTransactionMessageWithSigners,
  address as toAddress,
} from "@solana/kit";
import { getTransferSolInstruction } from "@solana-program/system";
import {
  ASSOCIATED_TOKEN_PROGRAM_ADDRESS,
  findAssociatedTokenPda,
  getCreateAssociatedTokenIdempotentInstruction,
  getTransferCheckedInstruction,
  TOKEN_PROGRAM_ADDRESS,
} from "@solana-program/token";
import { mapLimited } from "../internal/concurrency.ts";
import { SOLANA_LOADERS, SOLANA_SYSVAR_OWNER } from "./addresses.ts";
import {
  BlockhashNotFoundError,
  type ChainError,
  ChainRequestError,
  ChainTimeoutError,
  ChainUnreachableError,
  scrubRpcUrl,
  TransactionKnownError,
  TransactionRejectedError,
  UnclearSendError,
  withReadRetries,
} from "./errors.ts";
import type {
  ChainClient,
  ChainConfig,
  EvmAuthorization,
  IncomingTransfer,
  LostRecipient,
  SignedTransfer,
  TokenInfo,
  TransferInput,
  TransferPlan,
  TransferPlanWithBalances,
  TransferStatus,
} from "./types.ts";

type SolanaRpc = ReturnType<typeof createSolanaRpc>;

/** The base fee per signature; Svc's transfers carry one signature and no priority fee. */
const LAMPORTS_PER_SIGNATURE = 5_000n;
/** Size of an SPL token account, whose rent a transfer pays when it creates the recipient's. */
const TOKEN_ACCOUNT_SIZE = 165n;
const COMPUTE_BUDGET_PROGRAM = "ComputeBudget111111111111111111111111111111" as Address;
/** The most signatures one `getSignatureStatuses` request may ask for. */
export const MAX_SIGNATURE_STATUSES = 256;
/** Signatures looked at per address and page of `getSignaturesForAddress` (the most a node lists). */
const SIGNATURES_PAGE = 1000;
/**
 * The first page's size: a pass covers the few seconds since the last, so a few entries usually reach back
 * past the cursor. A full first page read an active account's last 1,000 signatures on every pass.
 */
const FIRST_SIGNATURES_PAGE = 20;
/** Addresses whose history is read at once. */
const SCAN_CONCURRENCY = 8;
/** How long one RPC call may take before it fails with {@link ChainTimeoutError}. */
const DEFAULT_TIMEOUT_MS = 15_000;
/**
 * How many slots (or blocks, which are no shorter) a node behind a load balancer may lag the one that told
 * the chain's height, about a minute on mainnet: a node further behind is not served. What such a node
 * cannot tell (a status below the height's slot, a listed transaction it cannot return) counts once the chain
 * is that far past it.
 */
export const SOLANA_NODE_LAG = 150n;
/** Calls that hand the node a transaction (or ask it to make one); every `get…` method is a read. */
const SEND_METHODS: ReadonlySet<string> = new Set(["sendTransaction", "requestAirdrop"]);

/** Options of {@link SolanaChain}, for tests and tuning; every field has a default. */
export interface SolanaChainOptions {
  /** How long one RPC call may take, in ms; default 15,000. */
  timeoutMs?: number;
}

/**
 * The chain layer over a Solana JSON-RPC endpoint (`@solana/kit`). SOL transfers through the System
 * program; SPL token transfers with TransferChecked between associated token accounts, creating the
 * recipient's (idempotently) when missing; statuses from signature statuses and blockhash expiry; incoming
 * transfers from each watched address's (and its token accounts') signature history, at `confirmed`.
 *
 * Token balances and incoming token transfers are those of the owner's associated token account (the
 * account transfers to an address go to).
 *
 * @example
 * ```ts
 * const solana = new SolanaChain(registry.get("solana")!);
 * await solana.getBalance(owner, solana.config.tokens[0]!); // USDC atomic units
 * ```
 */
export class SolanaChain implements ChainClient {
  readonly config: ChainConfig;
  readonly #rpc: SolanaRpc;
  /** Varies the compute-unit limit so two identical transfers in one slot are distinct transactions. */
  #uniquifier = randomInt(50_000);

  constructor(config: ChainConfig, options: SolanaChainOptions = {}) {
    if (config.kind !== "solana") throw new Error(`SolanaChain given a ${config.kind} chain`);
    this.config = config;
    this.#rpc = createSolanaRpcFromTransport(
      chainTransport(config.name, config.rpcUrl, options.timeoutMs ?? DEFAULT_TIMEOUT_MS),
    );
  }

  isValidAddress(address: string): boolean {
    return isAddress(address);
  }

  async getBalance(owner: string, token: TokenInfo): Promise<bigint> {
    return (await this.#balanceRead(owner, token)).amount;
  }

  /** `owner`'s balance of `token` and the slot whose state the node read it from (its answer's context). */
  async #balanceRead(owner: string, token: TokenInfo): Promise<{ amount: bigint; slot: bigint }> {
    if (token.address === null) {
      const { context, value } = await this.#rpc
        .getBalance(toAddress(owner), { commitment: "confirmed" })
        .send();
      return { amount: value, slot: context.slot };
    }
    const ata = await associatedTokenAccount(owner, token.address);
    const { context, value } = await this.#rpc
      .getAccountInfo(ata, { commitment: "confirmed", encoding: "jsonParsed" })
      .send();
    if (value === null) return { amount: 0n, slot: context.slot };
    const amount = (value.data as { parsed?: { info?: { tokenAmount?: { amount?: unknown } } } }).parsed?.info
      ?.tokenAmount?.amount;
    if (typeof amount !== "string") {
      // The associated address holds something else: the node's answer is not a balance.
      throw new ChainRequestError({ chain: this.config.name, method: "getAccountInfo" });
    }
    return { amount: BigInt(amount), slot: context.slot };
  }

  getHead(): Promise<bigint> {
    return this.#rpc.getSlot({ commitment: "confirmed" }).send();
  }

  async planTransfer(input: TransferInput): Promise<TransferPlan> {
    const [rent, { value: blockhash }] = await Promise.all([
      this.#recipientAccountRent(input.to, input.token),
      this.#rpc.getLatestBlockhash({ commitment: "confirmed" }).send(),
    ]);
    return {
      ...input,
      fee: LAMPORTS_PER_SIGNATURE + rent,
      solana: { blockhash: blockhash.blockhash, lastValidBlockHeight: blockhash.lastValidBlockHeight },
      ...(rent > 0n ? { recipientAccountRent: rent } : {}),
    };
  }

  async planTransferWithBalances(
    input: TransferInput,
    _authorizations?: readonly EvmAuthorization[],
    signatures: readonly string[] = [],
  ): Promise<TransferPlanWithBalances> {
    const native = this.config.nativeToken;
    const sendsNative = input.token.address === null;
    const [plan, balance, nativeBalance, rentExemption, recipientAccount, tokenAccountRent] =
      await Promise.all([
        this.planTransfer(input),
        this.#balanceRead(input.from, input.token),
        sendsNative ? undefined : this.#balanceRead(input.from, native),
        Promise.all([
          this.#systemAccountRent(),
          sendsNative ? this.getBalance(input.to, native) : undefined,
        ]).then(([minimum, recipientBalance]) => ({ minimum, recipientBalance })),
        sendsNative ? undefined : this.#lostRecipient(input.to),
        this.#tokenAccountRent(),
      ]);
    // Read after the balances: a transfer that had not landed by then is not in them.
    const readAt = nativeBalance && nativeBalance.slot < balance.slot ? nativeBalance.slot : balance.slot;
    const signaturesLanded = await this.#landedBy(signatures, readAt);
    return {
      plan,
      balance: balance.amount,
      nativeBalance: (nativeBalance ?? balance).amount,
      rentExemption,
      signaturesLanded,
      tokenAccountRent,
      ...(recipientAccount ? { lostRecipient: recipientAccount } : {}),
    };
  }

  async getBalanceWithLanded(
    owner: string,
    token: TokenInfo,
    signatures: readonly string[],
  ): Promise<{ balance: bigint; signaturesLanded: boolean[] }> {
    const balance = await this.#balanceRead(owner, token);
    return { balance: balance.amount, signaturesLanded: await this.#landedBy(signatures, balance.slot) };
  }

  /**
   * Of each signature, in order, whether its transaction had landed (succeeded or failed: either way it paid
   * its fee) in `slot` or before, in a block confirmed: what was read at `slot`, confirmed, holds. A status of
   * a later slot, or none, is a transfer not in what was read at `slot`; so is one only processed, whose
   * block at a slot before is not an ancestor of the one read (another fork: it may land yet, elsewhere).
   * One request (the node answers at most {@link MAX_SIGNATURE_STATUSES} at once).
   */
  async #landedBy(signatures: readonly string[], slot: bigint): Promise<boolean[]> {
    if (signatures.length === 0) return [];
    const { value } = await this.#rpc
      .getSignatureStatuses(signatures.slice(0, MAX_SIGNATURE_STATUSES) as Signature[], {
        searchTransactionHistory: true,
      })
      .send();
    return signatures.map((_, i) => {
      const status = value[i];
      return (
        status !== null &&
        status !== undefined &&
        status.slot <= slot &&
        (status.confirmationStatus === "confirmed" || status.confirmationStatus === "finalized")
      );
    });
  }

  /**
   * What `address` is when a token sent to it is lost ({@link LostRecipient}): a program, a sysvar, or an
   * account of a token program (SPL Token or Token-2022) but a multisig of SPL Token; undefined otherwise (a
   * wallet, an account that does not exist yet, one another program keeps for its owner).
   */
  async #lostRecipient(address: string): Promise<LostRecipient | undefined> {
    // What tells the kind is in the first 166 bytes and the size; the rest of the account is not fetched.
    const { value } = await this.#rpc
      .getAccountInfo(toAddress(address), {
        commitment: "confirmed",
        encoding: "base64",
        dataSlice: { offset: 0, length: 166 },
      })
      .send();
    if (value === null) return undefined;
    // A program, or its data account (owned by the loader that runs it: nobody signs for it).
    if (value.executable || SOLANA_LOADERS.has(value.owner)) return "program";
    if (value.owner === SOLANA_SYSVAR_OWNER) return "sysvar";
    if (!TOKEN_PROGRAMS.has(value.owner)) return undefined;
    const kind = tokenProgramAccount(value.owner, Number(value.space), Buffer.from(value.data[0], "base64"));
    return kind === "multisig" ? undefined : kind === "other" ? "token_program_other" : kind;
  }

  /** The rent exemption of an account holding no data (a wallet's): fixed by the cluster, read once. */
  #systemAccountRent(): Promise<bigint> {
    this.#systemAccountRentRead ??= this.#rpc
      .getMinimumBalanceForRentExemption(0n)
      .send()
      .catch((error: unknown) => {
        this.#systemAccountRentRead = undefined;
        throw error;
      });
    return this.#systemAccountRentRead;
  }
  #systemAccountRentRead: Promise<bigint> | undefined;

  /** The rent of the recipient's token account when the transfer creates it; 0 when it exists (or SOL is sent). */
  async #recipientAccountRent(to: string, token: TokenInfo): Promise<bigint> {
    if (token.address === null) return 0n;
    const ata = await associatedTokenAccount(to, token.address);
    const { value } = await this.#rpc
      .getAccountInfo(ata, {
        commitment: "confirmed",
        encoding: "base64",
        dataSlice: { offset: 0, length: 0 },
      })
      .send();
    if (value !== null) return 0n;
    return this.#tokenAccountRent();
  }

  /** The rent exemption of an SPL token account: fixed by the cluster, read once. */
  #tokenAccountRent(): Promise<bigint> {
    this.#tokenAccountRentRead ??= this.#rpc
      .getMinimumBalanceForRentExemption(TOKEN_ACCOUNT_SIZE)
      .send()
      .catch((error: unknown) => {
        this.#tokenAccountRentRead = undefined;
        throw error;
      });
    return this.#tokenAccountRentRead;
  }
  #tokenAccountRentRead: Promise<bigint> | undefined;

  opensRecipientAccount(raw: string): boolean {
    return opensTokenAccount(decodeWireTransaction(raw).message);
  }

  async signTransfer(plan: TransferPlan, privateKey: Uint8Array): Promise<SignedTransfer> {
    if (!plan.solana) throw new Error("signTransfer given a plan made by another kind of chain");
    if (privateKey.length !== 32) throw new Error("Solana private key must be a 32-byte seed");
    const signer = await createKeyPairSignerFromPrivateKeyBytes(privateKey);
    if (signer.address !== plan.from) throw new Error("signTransfer given another account's key");
    const to = toAddress(plan.to);
    const instructions: Instruction[] = [this.#uniqueComputeLimit()];
    if (plan.token.address === null) {
      instructions.push(getTransferSolInstruction({ source: signer, destination: to, amount: plan.amount }));
    } else {
      const mint = toAddress(plan.token.address);
      const [source, destination] = await Promise.all([
        associatedTokenAccount(signer.address, mint),
        associatedTokenAccount(to, mint),
      ]);
      // The recipient's token account is opened only when the plan found none, and counted its rent: one
      // found open is not opened again if its owner closes it meanwhile (the transfer then fails, paying no
      // rent the policy did not count).
      if (plan.recipientAccountRent)
        instructions.push(
          getCreateAssociatedTokenIdempotentInstruction({ payer: signer, ata: destination, owner: to, mint }),
        );
      instructions.push(
        getTransferCheckedInstruction({
          source,
          mint,
          destination,
          authority: signer,
          amount: plan.amount,
          decimals: plan.token.decimals,
        }),
      );
    }
    const { blockhash, lastValidBlockHeight } = plan.solana;
    const message = pipe(
      createTransactionMessage({ version: 0 }),
      (m) => setTransactionMessageFeePayerSigner(signer, m),
      (m) =>
        setTransactionMessageLifetimeUsingBlockhash(
          { blockhash: blockhash as Blockhash, lastValidBlockHeight },
          m,
        ),
      (m) => appendTransactionMessageInstructions(instructions, m),
    );
    const signed = await signTransactionMessageWithSigners(message);
    return {
      txHash: getSignatureFromTransaction(signed),
      raw: getBase64EncodedWireTransaction(signed),
      lastValidBlockHeight,
    };
  }

  async broadcast(signed: SignedTransfer): Promise<void> {
    try {
      await this.#rpc
        .sendTransaction(signed.raw as Base64EncodedWireTransaction, {
          encoding: "base64",
          preflightCommitment: "confirmed",
        })
        .send();
    } catch (error) {
      // Sending one that already landed fails preflight (AlreadyProcessed): that is success.
      if (error instanceof TransactionKnownError) return;
      // So may a node say otherwise of one it has (its preflight sees the spent funds): ask the chain.
      const { value } = await this.#rpc
        .getSignatureStatuses([signed.txHash as Signature], { searchTransactionHistory: true })
        .send()
        .catch(() => ({ value: [null] }));
      if (value[0]) return;
      throw error;
    }
  }

  async getTransferStatus(
    signed: Pick<SignedTransfer, "txHash" | "nonce" | "lastValidBlockHeight">,
    from: string,
  ): Promise<TransferStatus> {
    // The height is read before the status: if the status is then missing while the chain had already
    // passed the transaction's last valid height, it can never land.
    const tip =
      signed.lastValidBlockHeight === undefined
        ? undefined
        : // Finalized: a block that can no longer be rolled back is past the last valid height, so nothing
          // signed with that blockhash can still land, and re-signing cannot pay twice.
          await this.#rpc.getEpochInfo({ commitment: "finalized" }).send();
    const {
      context,
      value: [status],
    } = await this.#rpc
      .getSignatureStatuses([signed.txHash as Signature], { searchTransactionHistory: true })
      .send();
    if (status) {
      const landed =
        Boolean(status.err) ||
        status.confirmationStatus === "confirmed" ||
        status.confirmationStatus === "finalized";
      // Its block time and what it cost the sender: a node behind the one that answered the status may not
      // serve the transaction yet; asked again at the next pass. Once the status is finalized, a node that
      // still serves none keeps no transaction history: the outcome is the status's, without what only the
      // transaction tells.
      const found = landed ? await this.#landedTransaction(signed.txHash as Signature, from) : undefined;
      if (!found) {
        if (!landed || status.confirmationStatus !== "finalized") return { state: "pending" };
        return status.err
          ? { state: "failed", reason: describeTransactionError(status.err) }
          : { state: "confirmed" };
      }
      if (status.err)
        return { state: "failed", reason: describeTransactionError(status.err), fee: found.fee };
      return found.blockTime === undefined
        ? { state: "confirmed", fee: found.fee }
        : { state: "confirmed", blockTime: found.blockTime, fee: found.fee };
    }
    if (
      tip !== undefined &&
      signed.lastValidBlockHeight !== undefined &&
      tip.blockHeight > signed.lastValidBlockHeight &&
      // Missing by a node that had seen the chain up to that height: behind a load balancer, the status may
      // come from a node behind the one that told the height, which has not seen the transaction yet.
      (context.slot >= tip.absoluteSlot || tip.blockHeight > signed.lastValidBlockHeight + SOLANA_NODE_LAG)
    ) {
      return { state: "dropped", reason: "blockhash expired before the transaction landed" };
    }
    return { state: "pending" };
  }

  /**
   * Cursor: the last `confirmed` slot scanned. A newest slot at most {@link SOLANA_NODE_LAG} below the cursor
   * is a node lagging behind (the pass scans nothing); further below, a cluster restarted under the same
   * network name (the local devnet's is the same at every start), scanned from its start. One restarted to
   * within that distance of the cursor is taken for a lagging node and its first slots are passed over; the
   * service drops the cursors of local chains it starts anew itself. Records already made are kept by the
   * caller's uniqueness.
   */
  async scanIncoming(
    addresses: () => Promise<readonly string[]>,
    cursor: string | null,
  ): Promise<{ transfers: IncomingTransfer[]; cursor: string }> {
    const head = await this.#rpc.getSlot({ commitment: "confirmed" }).send();
    if (cursor === null) return { transfers: [], cursor: head.toString() };
    let after = BigInt(cursor);
    // A node lagging behind the one that answered before: nothing to scan yet. Far below, a cluster
    // restarted under the same network name: scanned from its start.
    if (head <= after && after - head <= SOLANA_NODE_LAG) return { transfers: [], cursor };
    if (head < after) after = -1n;

    const watch = await this.#watchMap(await addresses());
    // Each signature with the slot it landed in.
    const signatures = new Map<Signature, bigint>();
    await mapLimited([...watch.keys()], SCAN_CONCURRENCY, async (account) => {
      for (const { signature, slot } of await this.#signaturesBetween(account, after, head))
        signatures.set(signature, slot);
    });
    const transfers: IncomingTransfer[] = [];
    await mapLimited([...signatures], SCAN_CONCURRENCY, async ([signature, slot]) => {
      const found = await this.#transfersIn(signature, watch);
      // Listed, but not returned: a node behind a load balancer's other node has not seen it yet, and the
      // scan fails to read the range again; only once no node could lag so far is it taken as never landed.
      if (found === undefined && slot + SOLANA_NODE_LAG >= head)
        throw new ChainRequestError({ chain: this.config.name, method: "getTransaction" });
      transfers.push(...(found ?? []));
    });
    return { transfers, cursor: head.toString() };
  }

  async getIncomingTransfers(txHash: string, addresses: readonly string[]): Promise<IncomingTransfer[]> {
    return (await this.#transfersIn(txHash as Signature, await this.#watchMap(addresses))) ?? [];
  }

  /**
   * Landed, successful signatures touching `account` in slots (after, upTo], newest first, each with its
   * slot. The history must have seen `upTo` (`minContextSlot`): behind a load balancer, a node behind the
   * one that told the head refuses, rather than list less than the range holds.
   */
  async #signaturesBetween(
    account: Address,
    after: bigint,
    upTo: bigint,
  ): Promise<{ signature: Signature; slot: bigint }[]> {
    const found: { signature: Signature; slot: bigint }[] = [];
    let before: Signature | undefined;
    let limit = FIRST_SIGNATURES_PAGE;
    for (;;) {
      const page = await this.#rpc
        .getSignaturesForAddress(account, {
          commitment: "confirmed",
          limit,
          minContextSlot: upTo,
          ...(before ? { before } : {}),
        })
        .send();
      for (const entry of page) {
        if (entry.slot > after && entry.slot <= upTo && entry.err === null)
          found.push({ signature: entry.signature, slot: entry.slot });
      }
      const last = page[page.length - 1];
      if (!last || page.length < limit || last.slot <= after) return found;
      before = last.signature;
      limit = SIGNATURES_PAGE;
    }
  }

  /**
   * The accounts to read history from, each mapped to the watched owner and, for a token account, the
   * token: the owner itself (SOL arrives there) and its associated account for each token.
   */
  async #watchMap(owners: readonly string[]): Promise<Map<Address, { owner: string; token: TokenInfo }>> {
    const map = new Map<Address, { owner: string; token: TokenInfo }>();
    const tokens = this.config.tokens.filter((t) => t.address !== null);
    await mapLimited([...owners], SCAN_CONCURRENCY, async (owner) => {
      if (!isAddress(owner)) return;
      map.set(owner, { owner, token: this.config.nativeToken });
      for (const token of tokens) {
        map.set(await associatedTokenAccount(owner, token.address ?? ""), { owner, token });
      }
    });
    return map;
  }

  /** A transaction as the node serves it (`jsonParsed`, at `confirmed`); null when it serves none. */
  async #parsedTransaction(signature: Signature): Promise<ParsedTransaction | null> {
    const answer: unknown = await this.#rpc
      .getTransaction(signature, {
        commitment: "confirmed",
        encoding: "jsonParsed",
        maxSupportedTransactionVersion: 0,
      })
      .send();
    return parsedTransaction(answer);
  }

  /**
   * A landed transaction's block time and what it took from `from`'s lamports beyond the SOL it transferred
   * to others (the fee, and the rent of accounts it opened; all of the change when it failed); undefined when
   * the node returns no such transaction. The fee is undefined when `from` is not among its accounts.
   */
  async #landedTransaction(
    signature: Signature,
    from: string,
  ): Promise<{ blockTime?: Date; fee?: bigint } | undefined> {
    const tx = await this.#parsedTransaction(signature);
    if (!tx) return undefined;
    const time = blockTimeOf(tx);
    const blockTime = time === undefined ? {} : { blockTime: time };
    const at = tx.transaction.message.accountKeys?.findIndex((key) => accountKeyOf(key) === from) ?? -1;
    const before = toBigInt(tx.meta?.preBalances?.[at]);
    const after = toBigInt(tx.meta?.postBalances?.[at]);
    if (at < 0 || before === undefined || after === undefined) return blockTime;
    // What it sent others by its own instructions (a SOL transfer's amount), which is not a cost beyond it.
    let transferred = 0n;
    if (!tx.meta?.err) {
      for (const { program, parsed } of tx.transaction.message.instructions) {
        if (program !== "system" || typeof parsed !== "object" || parsed.type !== "transfer") continue;
        if (parsed.info?.source === from && parsed.info.destination !== from)
          transferred += toBigInt(parsed.info.lamports) ?? 0n;
      }
    }
    return { ...blockTime, fee: before - after - transferred };
  }

  /**
   * The transfers one transaction made into the watched accounts, from its parsed instructions; undefined
   * when the node returns no such transaction.
   */
  async #transfersIn(
    signature: Signature,
    watch: Map<Address, { owner: string; token: TokenInfo }>,
  ): Promise<IncomingTransfer[] | undefined> {
    const tx = await this.#parsedTransaction(signature);
    if (!tx) return undefined;
    if (tx.meta?.err) return [];
    const blockTime = blockTimeOf(tx) ?? new Date();
    const transfers: IncomingTransfer[] = [];
    flattenInstructions(tx).forEach((instruction, index) => {
      const found = parseTransfer(instruction, watch);
      if (found) transfers.push({ txHash: signature, index, blockTime, ...found });
    });
    return transfers;
  }

  #uniqueComputeLimit(): Instruction {
    this.#uniquifier = (this.#uniquifier + 1) % 50_000;
    const data = new Uint8Array(5);
    data[0] = 2; // SetComputeUnitLimit
    new DataView(data.buffer).setUint32(1, 200_000 + this.#uniquifier, true);
    return { programAddress: COMPUTE_BUDGET_PROGRAM, accounts: [], data };
  }
}

/**
 * The most a signed Solana transfer (`raw`, base64, as recorded) takes from its fee payer beyond the SOL it
 * transfers: the base fee of each of its signatures and, when it opens its recipient's token account, that
 * account's rent (`tokenAccountRent`), as {@link SolanaChain.getTransferStatus} finds it taken once landed.
 * Undefined when `raw` is no Solana transaction.
 * @example solanaFeeCap(row.rawTx, 2_039_280n) // 5000n, or 2044280n for one that opens the account
 */
export function solanaFeeCap(raw: string, tokenAccountRent: bigint): bigint | undefined {
  try {
    const { signatures, message } = decodeWireTransaction(raw);
    return BigInt(signatures) * LAMPORTS_PER_SIGNATURE + (opensTokenAccount(message) ? tokenAccountRent : 0n);
  } catch {
    return undefined;
  }
}

/** A base64 wire transaction's signature count and compiled message. */
function decodeWireTransaction(raw: string) {
  const transaction = getTransactionDecoder().decode(getBase64Encoder().encode(raw));
  return {
    signatures: Object.keys(transaction.signatures).length,
    message: getCompiledTransactionMessageDecoder().decode(transaction.messageBytes),
  };
}

/** Whether a transaction calls the associated token program: Svc's transfers do only to open an account. */
function opensTokenAccount(message: { staticAccounts: readonly Address[] }): boolean {
  return message.staticAccounts.includes(ASSOCIATED_TOKEN_PROGRAM_ADDRESS);
}

/**
 * The CAIP-2 network of a Solana cluster: `solana:` and the first 32 characters of its genesis hash (for
 * local clusters, whose genesis is not known in advance).
 * @example await discoverSolanaNetwork("http://127.0.0.1:8899") // "solana:CjJHGAB339vEkJ3wVELsSe6GV1Bz3XKV"
 */
export async function discoverSolanaNetwork(chain: string, rpcUrl: string): Promise<string> {
  const rpc = createSolanaRpcFromTransport(chainTransport(chain, rpcUrl, DEFAULT_TIMEOUT_MS));
  const genesis = await rpc.getGenesisHash().send();
  return `solana:${genesis.slice(0, 32)}`;
}

const readRpcs = new Map<string, SolanaRpc>();

/**
 * A kit RPC of a Solana chain over the chain layer's transport (errors as chain errors, reads retried, a time
 * limit on each call), one per endpoint and reused, for reads that {@link SolanaChain} does not offer (x402's
 * blockhash and settlement reads).
 * @example await solanaReadRpc(registry.get("solana")!).getBlockHeight().send()
 */
export function solanaReadRpc(config: Pick<ChainConfig, "name" | "rpcUrl">): SolanaRpc {
  const key = `${config.name}\n${config.rpcUrl}`;
  let rpc = readRpcs.get(key);
  if (!rpc) {
    rpc = createSolanaRpcFromTransport(chainTransport(config.name, config.rpcUrl, DEFAULT_TIMEOUT_MS));
    readRpcs.set(key, rpc);
  }
  return rpc;
}

/**
 * kit's HTTP transport as the chain layer uses it: what goes wrong leaves as a chain error (see
 * errors.ts), a JSON-RPC error answer included, without the URL's path and query (providers put API keys
 * there); every call has a time limit, and an idempotent read is retried after a transient transport
 * failure.
 */
function chainTransport(chain: string, url: string, timeoutMs: number): RpcTransport {
  const inner = createDefaultRpcTransport({ url });
  return (async (request: Parameters<RpcTransport>[0]) => {
    const named = (request.payload as { method?: unknown } | null)?.method;
    const method = typeof named === "string" ? named : "unknown";
    return withReadRetries(!SEND_METHODS.has(method), async () => {
      const timer = AbortSignal.timeout(timeoutMs);
      const signal = request.signal ? AbortSignal.any([request.signal, timer]) : timer;
      let response: unknown;
      try {
        response = await inner({ ...request, signal });
      } catch (error) {
        scrubRpcUrl(error, url);
        if (request.signal?.aborted) throw error;
        if (timer.aborted) throw new ChainTimeoutError({ chain, method, timeoutMs }, error);
        if (isSolanaError(error, SOLANA_ERROR__RPC__TRANSPORT_HTTP_ERROR))
          throw new ChainUnreachableError({ chain, method, status: error.context.statusCode }, error);
        // fetch rejects with a TypeError when no response came: refused, reset, closed under the request;
        // kit with a SyntaxError when the answer is not JSON (a proxy's page): no usable answer either.
        if (error instanceof TypeError) throw new ChainUnreachableError({ chain, method }, error);
        if (error instanceof SyntaxError)
          throw new ChainUnreachableError({ chain, method, notJsonRpc: true }, error);
        throw error;
      }
      // JSON that is no JSON-RPC answer (`{}`, `null`): no usable answer either.
      if (typeof response !== "object" || response === null || !("result" in response || "error" in response))
        throw new ChainUnreachableError({ chain, method, notJsonRpc: true });
      const answer = (response as { error?: unknown }).error;
      if (answer !== undefined) throw fromErrorAnswer(answer, chain, method);
      return response;
    });
  }) as RpcTransport;
}

/**
 * The JSON-RPC error codes of an endpoint's own trouble (an internal error, a node unhealthy or behind): no
 * verdict on the transaction, which may have gone on. Any other error answer to a send is a refusal.
 */
const UNCLEAR_SEND_CODES: ReadonlySet<number> = new Set([
  SOLANA_ERROR__JSON_RPC__INTERNAL_ERROR,
  SOLANA_ERROR__JSON_RPC__SERVER_ERROR_NODE_UNHEALTHY,
]);

/** kit's reading of a JSON-RPC error answer; an answer kit cannot read (no `data` where it wants one) as is. */
function kitErrorOf(answer: unknown): unknown {
  try {
    return getSolanaErrorFromJsonRpcError(answer);
  } catch {
    return answer;
  }
}

/** A JSON-RPC error answer as the chain error it stands for, kit's reading of it as the cause. */
function fromErrorAnswer(answer: unknown, chain: string, method: string): ChainError {
  const cause = kitErrorOf(answer);
  const { code, message } = answer as { code?: unknown; message?: unknown };
  if (!SEND_METHODS.has(method)) {
    const rpcCode = Number(code);
    return new ChainRequestError({ chain, method, ...(Number.isFinite(rpcCode) ? { rpcCode } : {}) }, cause);
  }
  // A failed preflight carries the transaction's own error as its cause.
  const failure = isSolanaError(
    cause,
    SOLANA_ERROR__JSON_RPC__SERVER_ERROR_SEND_TRANSACTION_PREFLIGHT_FAILURE,
  )
    ? cause.cause
    : undefined;
  if (isSolanaError(failure, SOLANA_ERROR__TRANSACTION_ERROR__BLOCKHASH_NOT_FOUND))
    return new BlockhashNotFoundError({ chain, method }, cause);
  if (isSolanaError(failure, SOLANA_ERROR__TRANSACTION_ERROR__ALREADY_PROCESSED))
    return new TransactionKnownError({ chain, method }, cause);
  const reason =
    (typeof message === "string" ? (message.split("\n")[0]?.slice(0, 200) ?? "") : "") ||
    `error ${String(code)}`;
  const rpcCode = Number(code);
  if (UNCLEAR_SEND_CODES.has(rpcCode)) {
    return new UnclearSendError(
      { chain, method, ...(Number.isFinite(rpcCode) ? { rpcCode } : {}), reason },
      cause,
    );
  }
  return new TransactionRejectedError({ chain, method, reason }, cause);
}

/** The Token-2022 program (Token Extensions). */
export const TOKEN_2022_PROGRAM_ADDRESS = "TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb";

/** The programs that own token accounts, mints and multisigs: SPL Token and Token-2022. */
const TOKEN_PROGRAMS: ReadonlySet<string> = new Set([TOKEN_PROGRAM_ADDRESS, TOKEN_2022_PROGRAM_ADDRESS]);

/**
 * An account a token program owns, by what it is to a token sent to it: a multisig of SPL Token can own the
 * token account the transfer creates; a token account, a mint, or anything else cannot.
 */
export type TokenProgramAccount = "token_account" | "mint" | "multisig" | "other";

/**
 * What an account `owner` (a token program) owns is, told from its size and its first 166 bytes as the
 * programs lay them out: a mint is 82 bytes, a token account 165, a multisig 355 (Token-2022 makes no other
 * account that size); a Token-2022 account with extensions is longer than 165 bytes, and its byte 165 says
 * what it is (1 a mint, 2 a token account). A multisig counts only when it is initialized (byte 2) and SPL
 * Token's own: this service's transfers run on SPL Token, which honours no other program's multisig.
 * @example tokenProgramAccount(TOKEN_PROGRAM_ADDRESS, 165, head) // "token_account"
 */
export function tokenProgramAccount(owner: string, size: number, head: Uint8Array): TokenProgramAccount {
  if (size === 82) return "mint";
  if (size === 165) return "token_account";
  if (size === 355) return owner === TOKEN_PROGRAM_ADDRESS && head[2] === 1 ? "multisig" : "other";
  if (size > 165 && head[165] === 1) return "mint";
  if (size > 165 && head[165] === 2) return "token_account";
  return "other";
}

/** The associated token account of `owner` for `mint` (SPL Token program). */
async function associatedTokenAccount(owner: string, mint: string): Promise<Address> {
  const [ata] = await findAssociatedTokenPda({
    owner: toAddress(owner),
    mint: toAddress(mint),
    tokenProgram: TOKEN_PROGRAM_ADDRESS,
  });
  return ata;
}

/** The shape of a `jsonParsed` transaction this module reads; everything else is ignored. */
interface ParsedInstruction {
  program?: string;
  parsed?: { type?: string; info?: Record<string, unknown> } | string;
}
interface ParsedTransaction {
  blockTime?: bigint | number | null;
  meta?: {
    err?: unknown;
    innerInstructions?: { index: number | bigint; instructions: ParsedInstruction[] }[] | null;
    preBalances?: readonly (bigint | number)[];
    postBalances?: readonly (bigint | number)[];
  } | null;
  transaction: {
    message: { instructions: ParsedInstruction[]; accountKeys?: readonly (string | { pubkey?: string })[] };
  };
}

/** When a transaction's block was made, as the node tells it; undefined when it does not. */
function blockTimeOf(tx: ParsedTransaction): Date | undefined {
  return tx.blockTime === null || tx.blockTime === undefined
    ? undefined
    : new Date(Number(tx.blockTime) * 1000);
}

/** An account's address as a `jsonParsed` transaction lists it (an object with `pubkey`, or the address). */
function accountKeyOf(key: string | { pubkey?: string }): string | undefined {
  return typeof key === "string" ? key : key.pubkey;
}

/** The node's answer read as the parts of a `jsonParsed` transaction this module uses; null when none. */
function parsedTransaction(answer: unknown): ParsedTransaction | null {
  if (typeof answer !== "object" || answer === null || !("transaction" in answer)) return null;
  return answer as ParsedTransaction;
}

/** Top-level instructions in order, each followed by the inner instructions it invoked. */
function flattenInstructions(tx: ParsedTransaction): ParsedInstruction[] {
  const inner = new Map<number, ParsedInstruction[]>();
  for (const group of tx.meta?.innerInstructions ?? []) inner.set(Number(group.index), group.instructions);
  return tx.transaction.message.instructions.flatMap((instruction, i) => [
    instruction,
    ...(inner.get(i) ?? []),
  ]);
}

/** A SOL or SPL token transfer into a watched account, if `instruction` is one. */
function parseTransfer(
  instruction: ParsedInstruction,
  watch: Map<Address, { owner: string; token: TokenInfo }>,
): Pick<IncomingTransfer, "from" | "to" | "token" | "amount"> | undefined {
  const parsed = instruction.parsed;
  if (!parsed || typeof parsed === "string" || !parsed.info) return undefined;
  const info = parsed.info;
  const destination = typeof info.destination === "string" ? (info.destination as Address) : undefined;
  const target = destination ? watch.get(destination) : undefined;
  if (!target) return undefined;
  if (instruction.program === "system" && parsed.type === "transfer" && target.token.address === null) {
    const amount = toBigInt(info.lamports);
    const from = info.source;
    if (amount === undefined || amount === 0n || typeof from !== "string") return undefined;
    return { from, to: target.owner, token: target.token, amount };
  }
  if (instruction.program === "spl-token" && target.token.address !== null) {
    let amount: bigint | undefined;
    if (parsed.type === "transfer") amount = toBigInt(info.amount);
    else if (parsed.type === "transferChecked") {
      if (info.mint !== target.token.address) return undefined;
      amount = toBigInt((info.tokenAmount as { amount?: unknown } | undefined)?.amount);
    } else return undefined;
    // The sender is the owner (or delegate) that signed for the source account.
    const from = info.authority ?? info.multisigAuthority ?? info.source;
    if (amount === undefined || amount === 0n || typeof from !== "string") return undefined;
    return { from, to: target.owner, token: target.token, amount };
  }
  return undefined;
}

function toBigInt(value: unknown): bigint | undefined {
  if (typeof value === "bigint") return value;
  if (typeof value === "number" && Number.isSafeInteger(value)) return BigInt(value);
  if (typeof value === "string" && /^\d+$/.test(value)) return BigInt(value);
  return undefined;
}

/** A transaction error as one line, e.g. `{"InstructionError":[1,{"Custom":1}]}`. */
function describeTransactionError(err: unknown): string {
  return JSON.stringify(err, (_key, value: unknown) =>
    typeof value === "bigint" ? value.toString() : value,
  );
}
