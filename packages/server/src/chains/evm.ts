import {
  type Address,
  type Chain,
  createPublicClient,
  decodeFunctionResult,
  defineChain,
  encodeFunctionData,
  erc20Abi,
  formatLog,
  formatTransactionReceipt,
  getAbiItem,
  getAddress,
  type Hash,
  type Hex,
  HttpRequestError,
  hexToBigInt,
  hexToBytes,
  hexToNumber,
  isAddress,
  keccak256,
  type Log,
  NonceTooLowError,
  numberToHex,
  type PublicClient,
  pad,
  parseAbi,
  parseEventLogs,
  parseTransaction,
  RpcError,
  type RpcLog,
  RpcRequestError,
  recoverTransactionAddress,
  TimeoutError,
  type TransactionReceipt,
  type Transport,
  toEventSelector,
  UnknownNodeError,
  TransactionNotFoundError as ViemTransactionNotFoundError,
} from "viem";
import { getNodeError } from "viem/utils";
import { mapLimited } from "../internal/concurrency.ts";
import {
  ChainRequestError,
  ChainTimeoutError,
  ChainUnavailableError,
  ChainUnreachableError,
  findChainError,
  NonceTakenError,
  scrubRpcUrl,
  TransactionNotFoundError,
  TransactionRejectedError,
  UnclearSendError,
  withReadRetries,
} from "./errors.ts";
import { evmAddressOf, signEvmTransaction } from "./evm-keys.ts";
import { JsonRpcEndpoint, jsonRpcHttp, NotJsonRpcAnswerError, type RpcCall } from "./json-rpc-http.ts";
import type {
  BroadcastTransfer,
  ChainClient,
  ChainConfig,
  EvmAuthorization,
  IncomingTransfer,
  SignedTransfer,
  TokenInfo,
  TransferInput,
  TransferPlan,
  TransferPlanWithBalances,
  TransferStatus,
} from "./types.ts";

const TRANSFER_EVENT = getAbiItem({ abi: erc20Abi, name: "Transfer" });
const TRANSFER_TOPIC = toEventSelector(TRANSFER_EVENT);
/** Gas of a plain value transfer to an account without code. */
const NATIVE_TRANSFER_GAS = 21_000n;
/** Used when a token transfer cannot be estimated (the sender does not hold the amount yet). */
const FALLBACK_TOKEN_TRANSFER_GAS = 100_000n;
/** Receipts asked for in one request (providers cap batches). */
const RECEIPTS_PER_BATCH = 20;
/** Blocks with their transactions asked for in one request while scanning (their answers are large). */
const BLOCKS_PER_BATCH = 10;
/** Blocks looked at by one scan: bounded, so one call stays cheap and the caller persists progress often. */
const MAX_BLOCKS_PER_SCAN = 50n;
/** Requests in flight at once while scanning (public endpoints rate-limit bursts). */
const SCAN_CONCURRENCY = 8;
/** How far back a scan restarts when the block it stopped at was replaced (a reorganisation). */
const REORG_RESCAN_BLOCKS = 128n;
/** How long a read of the fee caps is reused by later transfer plans, in ms. */
const FEE_CACHE_MS = 1_000;
/** Block times kept by hash (a few minutes of blocks on a fast chain). */
const BLOCK_TIMES_KEPT = 1_024;
/** How long one RPC call may take before it fails with {@link ChainTimeoutError}. */
const DEFAULT_TIMEOUT_MS = 15_000;
/** The idempotent reads this layer makes: retried after a transient transport failure. */
const READ_METHODS: ReadonlySet<string> = new Set([
  "eth_blockNumber",
  "eth_call",
  "eth_chainId",
  "eth_estimateGas",
  "eth_feeHistory",
  "eth_gasPrice",
  "eth_getBalance",
  "eth_getBlockByHash",
  "eth_getBlockByNumber",
  "eth_getLogs",
  "eth_getTransactionByHash",
  "eth_getTransactionCount",
  "eth_getTransactionReceipt",
  "eth_maxPriorityFeePerGas",
]);
/** Calls that hand the node a transaction. */
const SEND_METHODS: ReadonlySet<string> = new Set(["eth_sendRawTransaction", "eth_sendTransaction"]);

/** Options of {@link EvmChain}, for tests and tuning; every field has a default. */
export interface EvmChainOptions {
  /** viem's receipt polling interval in ms; default 250. */
  pollingIntervalMs?: number;
  /** How long one RPC call may take, in ms; default 15,000. */
  timeoutMs?: number;
}

/**
 * The chain layer over an EVM JSON-RPC endpoint (viem). EIP-1559 transfers of the native coin and of
 * ERC-20 tokens, statuses from receipts and nonces, and incoming transfers from blocks and `Transfer` logs.
 *
 * Incoming native value is seen only as a transaction's own `value` to a watched address (not value moved
 * by contract calls, which would need traces).
 *
 * @example
 * ```ts
 * const base = new EvmChain(registry.get("base")!);
 * await base.getBalance("0x70997970C51812dc3A010C7d01b50e0d17dc79C8", base.config.nativeToken); // wei
 * ```
 */
export class EvmChain implements ChainClient {
  readonly config: ChainConfig;
  readonly #client: PublicClient<Transport, Chain>;
  /** The endpoint under the client, for the reads one caller needs together ({@link EvmChain.#reads}). */
  readonly #rpc: JsonRpcEndpoint;
  readonly #chain: Chain;
  readonly #depth: bigint;
  readonly #blockTimes = new Map<Hash, Date>();
  #fees: { at: number; value: Promise<{ maxFeePerGas: bigint; maxPriorityFeePerGas: bigint }> } | undefined;

  constructor(config: ChainConfig, options: EvmChainOptions = {}) {
    if (config.kind !== "evm") throw new Error(`EvmChain given a ${config.kind} chain`);
    this.config = config;
    this.#chain = defineChain({
      id: evmChainId(config.network),
      name: config.name,
      nativeCurrency: { name: config.nativeToken.symbol, symbol: config.nativeToken.symbol, decimals: 18 },
      rpcUrls: { default: { http: [config.rpcUrl] } },
    });
    this.#rpc = new JsonRpcEndpoint(config.rpcUrl, { timeoutMs: options.timeoutMs ?? DEFAULT_TIMEOUT_MS });
    this.#client = createPublicClient({
      chain: this.#chain,
      transport: chainTransport(config.name, this.#rpc),
      pollingInterval: options.pollingIntervalMs ?? 250,
    });
    this.#depth = BigInt(config.scanDepth ?? 0);
  }

  isValidAddress(address: string): boolean {
    return isAddress(address, { strict: true });
  }

  async getBalance(address: string, token: TokenInfo): Promise<bigint> {
    const [balance] = await this.#reads([balanceCall(getAddress(address), token)]);
    return this.#balanceOf(token, balance);
  }

  /** The authorizations' states, then the nonce at the latest block and the balance there: one request. */
  async getFundsRead(
    address: string,
    token: TokenInfo,
    authorizations: readonly EvmAuthorization[],
  ): Promise<{ balance: bigint; minedNonce: number; authorizationsUsed: boolean[] }> {
    const owner = getAddress(address);
    const outcomes = await this.#reads([
      ...authorizations.map(authorizationStateCall),
      { method: "eth_getTransactionCount", params: [owner, "latest"] },
      balanceCall(owner, token),
    ]);
    const [mined, balance] = outcomes.slice(authorizations.length);
    return {
      balance: this.#balanceOf(token, balance),
      minedNonce: hexToNumber(resultOf(mined) as Hex),
      authorizationsUsed: outcomes.slice(0, authorizations.length).map(wasUsed),
    };
  }

  getHead(): Promise<bigint> {
    return this.#client.getBlockNumber({ cacheTime: 0 });
  }

  async planTransfer(input: TransferInput): Promise<TransferPlan> {
    return (await this.#plan(input, undefined)).plan;
  }

  /** The plan's reads and the sender's balances go to the node as one batch: one request, one moment. */
  async planTransferWithBalances(
    input: TransferInput,
    authorizations: readonly EvmAuthorization[] = [],
  ): Promise<TransferPlanWithBalances> {
    const { plan, balances, authorizationsUsed } = await this.#plan(input, authorizations);
    const [balance = 0n, nativeBalance = balance] = balances;
    return { plan, balance, nativeBalance, authorizationsUsed };
  }

  /**
   * A transfer's plan: the fee caps (cached, see {@link EvmChain.#feesPerGas}) beside one batch of the gas
   * estimate, the pending nonce and, with balances (`authorizations` given, maybe none), the state of each
   * authorization, the nonce at the latest block and the sender's balance of the token and of the native
   * coin there. The node answers each read at its latest block as it comes to it, so a block mined during
   * the request leaves the earlier reads a block behind: the states and the nonce come before the balances,
   * so a spend they show on chain is always in the balances, and one they show not yet on chain may be in
   * them already (counted twice by the check under the lock: refused a moment early, never over-admitted).
   */
  async #plan(
    input: TransferInput,
    authorizations: readonly EvmAuthorization[] | undefined,
  ): Promise<{ plan: TransferPlan; balances: bigint[]; authorizationsUsed: boolean[] }> {
    const from = getAddress(input.from);
    const to = getAddress(input.to);
    const native = input.token.address === null;
    const withBalances = authorizations !== undefined;
    const call = native
      ? { to, value: input.amount, data: undefined }
      : {
          to: getAddress(input.token.address ?? ""),
          value: 0n,
          data: encodeFunctionData({ abi: erc20Abi, functionName: "transfer", args: [to, input.amount] }),
        };
    const tokens = !withBalances ? [] : native ? [input.token] : [input.token, this.config.nativeToken];
    const states = authorizations ?? [];
    const [fees, [estimate, nonce, ...rest]] = await Promise.all([
      this.#feesPerGas(),
      this.#reads([
        {
          method: "eth_estimateGas",
          params: [
            { from, to: call.to, value: numberToHex(call.value), ...(call.data ? { data: call.data } : {}) },
          ],
        },
        { method: "eth_getTransactionCount", params: [from, "pending"] },
        ...states.map(authorizationStateCall),
        // With the balances (read at the latest block), the nonce at that block: sends from it on are not in them.
        ...(withBalances ? [{ method: "eth_getTransactionCount", params: [from, "latest"] }] : []),
        ...tokens.map((token) => balanceCall(from, token)),
      ]),
    ]);
    const gas = this.#gasLimit(estimate, native);
    const pendingNonce = hexToNumber(resultOf(nonce) as Hex);
    const used = rest.slice(0, states.length);
    const [mined, ...balances] = withBalances ? rest.slice(states.length) : [undefined];
    return {
      plan: {
        ...input,
        fee: gas * fees.maxFeePerGas,
        evm: {
          ...call,
          gas,
          ...fees,
          pendingNonce,
          ...(mined ? { minedNonce: hexToNumber(resultOf(mined) as Hex) } : {}),
        },
      },
      balances: tokens.map((token, i) => this.#balanceOf(token, balances[i])),
      authorizationsUsed: used.map(wasUsed),
    };
  }

  /**
   * Reads one caller needs together, in one request to the node: each call's outcome in order, a node's
   * refusal as the chain error it stands for. What fails for the request as a whole fails as any read does
   * (retried when transient).
   */
  #reads(calls: RpcCall[]): Promise<ReadOutcome[]> {
    const methods = calls.map((c) => c.method).join(",");
    return withReadRetries(true, async () => {
      let outcomes: Awaited<ReturnType<JsonRpcEndpoint["callBatch"]>>;
      try {
        outcomes = await this.#rpc.callBatch(calls);
      } catch (error) {
        throw chainErrorOf(error, this.config.name, this.#rpc, methods);
      }
      return outcomes.map((outcome, i) =>
        "error" in outcome
          ? { error: chainErrorOf(outcome.error, this.config.name, this.#rpc, calls[i]?.method ?? methods) }
          : outcome,
      );
    });
  }

  /**
   * A balance from its read ({@link balanceCall}): wei, or an ERC-20 `balanceOf` answer, one that does not
   * decode (no contract there) being the node's refusal.
   */
  #balanceOf(token: TokenInfo, outcome: ReadOutcome | undefined): bigint {
    const result = resultOf(outcome);
    if (token.address === null) return hexToBigInt(result as Hex);
    try {
      return decodeFunctionResult({ abi: erc20Abi, functionName: "balanceOf", data: result as Hex });
    } catch (cause) {
      throw new ChainRequestError({ chain: this.config.name, method: "eth_call" }, cause);
    }
  }

  async signTransfer(plan: TransferPlan, privateKey: Uint8Array, nonce?: number): Promise<SignedTransfer> {
    if (!plan.evm) throw new Error("signTransfer given a plan made by another kind of chain");
    if (privateKey.length !== 32) throw new Error("EVM private key must be 32 bytes");
    if (evmAddressOf(privateKey) !== getAddress(plan.from))
      throw new Error("signTransfer given another account's key");
    const used = nonce ?? plan.evm.pendingNonce;
    const raw = signEvmTransaction(
      {
        type: "eip1559",
        chainId: this.#chain.id,
        nonce: used,
        to: plan.evm.to,
        value: plan.evm.value,
        ...(plan.evm.data ? { data: plan.evm.data } : {}),
        gas: plan.evm.gas,
        maxFeePerGas: plan.evm.maxFeePerGas,
        maxPriorityFeePerGas: plan.evm.maxPriorityFeePerGas,
      },
      privateKey,
    );
    return { txHash: keccak256(raw), raw, nonce: used };
  }

  /**
   * The EIP-1559 fee caps, read at most once per {@link FEE_CACHE_MS} (concurrent planners share one read):
   * viem's caps leave a margin over the base fee, which moves at most 12.5% per block.
   */
  #feesPerGas(): Promise<{ maxFeePerGas: bigint; maxPriorityFeePerGas: bigint }> {
    const now = Date.now();
    if (this.#fees && now - this.#fees.at < FEE_CACHE_MS) return this.#fees.value;
    const value = this.#client
      .estimateFeesPerGas({ type: "eip1559" })
      .then(({ maxFeePerGas, maxPriorityFeePerGas }) => ({ maxFeePerGas, maxPriorityFeePerGas }));
    const entry = { at: now, value };
    this.#fees = entry;
    value.catch(() => {
      if (this.#fees === entry) this.#fees = undefined;
    });
    return value;
  }

  async broadcast(signed: SignedTransfer): Promise<void> {
    try {
      await this.#client.sendRawTransaction({ serializedTransaction: signed.raw as Hex });
    } catch (error) {
      // A node that already has it (in its pool or mined) may say so as an error: that is success.
      const known = await this.#client
        .getTransaction({ hash: signed.txHash as Hash })
        .then(() => true)
        .catch(() => false);
      if (known) return;
      if (error instanceof TransactionRejectedError) throw await this.#nonceTakenOr(error, signed.raw as Hex);
      throw error;
    }
  }

  /**
   * A rejected transaction whose nonce another transaction already holds, mined or pending in the pool
   * (geth's "replacement transaction underpriced"), as {@link NonceTakenError}: told from the account's
   * pending nonce, since viem names no error for it.
   */
  async #nonceTakenOr(rejection: TransactionRejectedError, raw: Hex): Promise<Error> {
    const { nonce } = parseTransaction(raw);
    if (nonce === undefined) return rejection;
    const from = await recoverTransactionAddress({ serializedTransaction: raw as never });
    const pending = await this.getPendingNonce(from).catch(() => undefined);
    if (pending === undefined || pending <= nonce) return rejection;
    return new NonceTakenError(
      { chain: this.config.name, method: "eth_sendRawTransaction", nonce },
      rejection,
    );
  }

  async getTransferStatus(
    signed: Pick<SignedTransfer, "txHash" | "nonce" | "lastValidBlockHeight">,
    from: string,
  ): Promise<TransferStatus> {
    const hash = signed.txHash as Hash;
    const receipt = await this.#receipt(hash);
    if (receipt) return this.#minedStatus(receipt);
    if (signed.nonce === undefined) return { state: "pending" };
    // Not mined, or not yet. The account's mined nonce is read before looking once more: if the receipt is
    // still missing while that nonce had already moved past ours, another transaction took it, and ours can
    // never be mined.
    const minedNonce = await this.getMinedNonce(from);
    const again = await this.#receipt(hash);
    if (again) return this.#minedStatus(again);
    if (minedNonce > signed.nonce) {
      return { state: "dropped", reason: `nonce ${signed.nonce} was used by another transaction` };
    }
    return { state: "pending" };
  }

  async getLandedStatuses(transfers: readonly BroadcastTransfer[]): Promise<(TransferStatus | undefined)[]> {
    const receipts = await this.#receipts(transfers.map(({ signed }) => signed.txHash as Hash));
    const statuses: (TransferStatus | undefined)[] = [];
    for (const outcome of receipts) {
      // No receipt (not mined, or not yet), or one this read could not tell: getTransferStatus decides.
      const receipt = "result" in outcome ? (outcome.result as TransactionReceipt | null) : null;
      statuses.push(receipt === null ? undefined : await this.#minedStatus(receipt).catch(() => undefined));
    }
    return statuses;
  }

  async #receipt(hash: Hash): Promise<TransactionReceipt | null> {
    const [outcome] = await this.#receipts([hash]);
    return resultOf(outcome) as TransactionReceipt | null;
  }

  /**
   * Transactions' receipts, {@link RECEIPTS_PER_BATCH} to a request: each read's outcome, in order, its
   * result a receipt, or null while the node serves none.
   */
  async #receipts(hashes: readonly Hash[]): Promise<ReadOutcome[]> {
    const outcomes = await this.#readAll(
      hashes.map((hash) => ({ method: "eth_getTransactionReceipt", params: [hash] })),
      RECEIPTS_PER_BATCH,
    );
    return outcomes.map((outcome) =>
      "result" in outcome && outcome.result !== null
        ? { result: formatTransactionReceipt(outcome.result as never) }
        : outcome,
    );
  }

  async #minedStatus(receipt: TransactionReceipt): Promise<TransferStatus> {
    const fee = feePaid(receipt);
    if (receipt.status === "reverted") return { state: "failed", reason: "reverted", fee };
    if (this.#depth > 0n) {
      const head = await this.#client.getBlockNumber({ cacheTime: 0 });
      if (receipt.blockNumber + this.#depth > head) return { state: "pending" };
    }
    return { state: "confirmed", blockTime: await this.#blockTime(receipt.blockHash), fee };
  }

  /**
   * When a block was made, by its hash (which fixes its contents, so the answer never goes stale): scans
   * remember the blocks they read, so confirming a transfer in a scanned block asks the node nothing more.
   */
  async #blockTime(blockHash: Hash): Promise<Date> {
    const known = this.#blockTimes.get(blockHash);
    if (known) return known;
    const block = await this.#client.getBlock({ blockHash });
    return this.#rememberBlockTime(blockHash, block.timestamp);
  }

  #rememberBlockTime(blockHash: Hash, timestamp: bigint): Date {
    const time = new Date(Number(timestamp) * 1000);
    this.#blockTimes.set(blockHash, time);
    // Oldest first out: confirmations ask about recent blocks.
    if (this.#blockTimes.size > BLOCK_TIMES_KEPT)
      this.#blockTimes.delete(this.#blockTimes.keys().next().value as Hash);
    return time;
  }

  getMinedNonce(address: string): Promise<number> {
    return this.#client.getTransactionCount({ address: getAddress(address), blockTag: "latest" });
  }

  getPendingNonce(address: string): Promise<number> {
    return this.#client.getTransactionCount({ address: getAddress(address), blockTag: "pending" });
  }

  /**
   * Cursor: `<block number>:<block hash>` of the last block scanned. A block replaced since (a
   * reorganisation deeper than `scanDepth`) restarts the scan a little earlier. A head below the cursor is a
   * node lagging behind (the pass scans nothing) when it is at most {@link REORG_RESCAN_BLOCKS} below; further
   * below, the chain is another (a local chain restarted), scanned from its first block. (A chain restarted
   * to within that distance is taken for a lagging node until it passes the cursor, then rescanned from
   * that distance back, its first blocks passed over; the service drops the cursors of local chains it starts
   * anew itself.) Records already made are kept by the
   * caller's uniqueness, so scanning a range twice is harmless.
   */
  async scanIncoming(
    addresses: () => Promise<readonly string[]>,
    cursor: string | null,
  ): Promise<{ transfers: IncomingTransfer[]; cursor: string; more?: boolean }> {
    const head = await this.#client.getBlockNumber({ cacheTime: 0 });
    const safeHead = head > this.#depth ? head - this.#depth : 0n;
    if (cursor === null) {
      return { transfers: [], cursor: await this.#cursorAt(safeHead) };
    }
    const [numberText, hash] = cursor.split(":");
    const last = BigInt(numberText ?? "0");
    let from: bigint;
    if (last > head) {
      // A node lagging behind the one that answered before (behind a load balancer): nothing to scan yet.
      // Far below, the chain is another one (a local chain restarted): read from its first block.
      if (last - head <= REORG_RESCAN_BLOCKS) return { transfers: [], cursor };
      from = 0n;
    } else {
      const block = await this.#client.getBlock({ blockNumber: last });
      from = block.hash === hash ? last + 1n : last > REORG_RESCAN_BLOCKS ? last - REORG_RESCAN_BLOCKS : 0n;
    }
    const to = safeHead < from + MAX_BLOCKS_PER_SCAN - 1n ? safeHead : from + MAX_BLOCKS_PER_SCAN - 1n;
    if (from > to) return { transfers: [], cursor };

    const watched = watchSet(await addresses());
    const blocks = await this.#blocks(range(from, to));
    const times = new Map(blocks.map((b) => [b.number, this.#rememberBlockTime(b.hash, b.timestamp)]));
    const transfers: IncomingTransfer[] = [];
    if (watched.size > 0) {
      const valueTxs = blocks.flatMap((b) =>
        b.transactions.flatMap((tx) => {
          if (!tx.to || !watched.has(tx.to.toLowerCase())) return [];
          const value = hexToBigInt(tx.value ?? "0x0");
          return value > 0n ? [{ ...tx, value, blockNumber: b.number }] : [];
        }),
      );
      const receipts = await this.#receipts(valueTxs.map((tx) => tx.hash));
      valueTxs.forEach((tx, i) => {
        const receipt = resultOf(receipts[i]) as TransactionReceipt | null;
        // Mined (its block was read) but not served yet, as a node behind a load balancer may answer: the
        // scan fails, and the range is read again, rather than passing over the transfer.
        if (receipt === null)
          throw new ChainRequestError({ chain: this.config.name, method: "eth_getTransactionReceipt" });
        if (receipt.status !== "success") return;
        const transfer = this.#nativeTransfer(tx, watched, times.get(tx.blockNumber) ?? new Date());
        if (transfer) transfers.push(transfer);
      });
      transfers.push(...(await this.#tokenTransfersIn(blocks, watched, times)));
    }
    const end = blocks[blocks.length - 1];
    return { transfers, cursor: `${to}:${end?.hash ?? ""}`, more: to < safeHead };
  }

  /**
   * Blocks with their transactions, as the scan needs them (number, hash, time; each transaction's hash,
   * sender, recipient and value), read {@link BLOCKS_PER_BATCH} to a request; a block the node does not
   * have (the chain moved under the scan) is its refusal.
   */
  async #blocks(numbers: bigint[]): Promise<ScannedBlock[]> {
    const calls = numbers.map((n) => ({ method: "eth_getBlockByNumber", params: [numberToHex(n), true] }));
    // A batch of large blocks can pass an endpoint's (or this client's) size limit: then one at a time.
    const answers = await this.#readAll(calls, BLOCKS_PER_BATCH).catch(() => this.#readAll(calls, 1));
    return answers.map((answer) => {
      const block = resultOf(answer) as RawBlock | null;
      if (!block) throw new ChainRequestError({ chain: this.config.name, method: "eth_getBlockByNumber" });
      return {
        number: hexToBigInt(block.number),
        hash: block.hash,
        timestamp: hexToBigInt(block.timestamp),
        logsBloom: block.logsBloom,
        transactions: block.transactions,
      };
    });
  }

  /** Many reads, `perRequest` to a batch, {@link SCAN_CONCURRENCY} batches at once; outcomes in order. */
  async #readAll(calls: RpcCall[], perRequest: number): Promise<ReadOutcome[]> {
    const chunks: RpcCall[][] = [];
    for (let at = 0; at < calls.length; at += perRequest) chunks.push(calls.slice(at, at + perRequest));
    return (await mapLimited(chunks, SCAN_CONCURRENCY, (chunk) => this.#reads(chunk))).flat();
  }

  async getIncomingTransfers(txHash: string, addresses: readonly string[]): Promise<IncomingTransfer[]> {
    const watched = watchSet(addresses);
    const receipt = await this.#receipt(txHash as Hash);
    if (receipt?.status !== "success") return [];
    const [tx, time] = await Promise.all([
      this.#client.getTransaction({ hash: txHash as Hash }).catch((error: unknown) => {
        // Mined a moment ago, gone now: a reorganisation (or a node behind a load balancer) dropped it.
        if (error instanceof ViemTransactionNotFoundError)
          throw new TransactionNotFoundError({ chain: this.config.name, txHash }, error);
        throw error;
      }),
      this.#blockTime(receipt.blockHash),
    ]);
    const transfers: IncomingTransfer[] = [];
    const native = this.#nativeTransfer(tx, watched, time);
    if (native) transfers.push(native);
    // The receipt holds the transaction's own logs: nothing else to ask.
    transfers.push(...this.#transfersInLogs(receipt.logs, watched, () => time));
    return transfers;
  }

  /**
   * A transaction's own value paid to a watched address, as an incoming transfer (index -1). The scan and
   * the single-transaction lookup both parse through here, so they always produce the same key.
   */
  #nativeTransfer(
    tx: { hash: Hash; from: Address; to: Address | null; value: bigint },
    watched: Map<string, string>,
    blockTime: Date,
  ): IncomingTransfer | undefined {
    const to = tx.to ? watched.get(tx.to.toLowerCase()) : undefined;
    if (!to || tx.value <= 0n) return undefined;
    return {
      txHash: tx.hash,
      index: -1,
      from: getAddress(tx.from),
      to,
      token: this.config.nativeToken,
      amount: tx.value,
      blockTime,
    };
  }

  /**
   * The token transfers to watched addresses in scanned blocks. One `eth_getLogs` reads the range; but a
   * node behind a load balancer's other node answers a range past its own head with the logs it has, without
   * a word. So a block whose logs bloom says it may hold such a transfer, and of which the answer holds no
   * transfer of a token, is asked about again by its hash, which a node without the block refuses: the scan
   * then fails and reads the range again, rather than pass over the transfer.
   */
  async #tokenTransfersIn(
    blocks: ScannedBlock[],
    watched: Map<string, string>,
    times: Map<bigint, Date>,
  ): Promise<IncomingTransfer[]> {
    const tokens = this.config.tokens.flatMap((t) => (t.address === null ? [] : [getAddress(t.address)]));
    const first = blocks[0];
    const last = blocks[blocks.length - 1];
    if (tokens.length === 0 || !first || !last) return [];
    const byNumber = new Map(blocks.map((b) => [b.number, b]));
    const logs: Log[] = await this.#client.getLogs({
      address: tokens,
      event: TRANSFER_EVENT,
      fromBlock: first.number,
      toBlock: last.number,
    });
    const answered = new Set<bigint>();
    for (const log of logs) {
      // Logs of another block than the one read at that height: the chain moved under the scan.
      if (log.blockNumber === null || byNumber.get(log.blockNumber)?.hash !== log.blockHash)
        throw new ChainRequestError({ chain: this.config.name, method: "eth_getLogs" });
      answered.add(log.blockNumber);
    }
    const transferBits = bloomBits(TRANSFER_TOPIC);
    const tokenBits = tokens.map(bloomBits);
    // The watched addresses' bits are worked out only once a block may hold a token transfer unanswered.
    let recipientBits: number[][] | undefined;
    const unanswered = blocks.filter((block) => {
      if (answered.has(block.number)) return false;
      const bloom = hexToBytes(block.logsBloom);
      if (!inBloom(bloom, transferBits) || !tokenBits.some((bits) => inBloom(bloom, bits))) return false;
      recipientBits ??= [...watched.keys()].map((address) => bloomBits(pad(address as Hex)));
      return recipientBits.some((bits) => inBloom(bloom, bits));
    });
    if (unanswered.length > 0) {
      const filters = unanswered.map((block) => ({
        blockHash: block.hash,
        address: tokens,
        topics: [TRANSFER_TOPIC],
      }));
      const outcomes = await this.#readAll(
        filters.map((filter) => ({ method: "eth_getLogs", params: [filter] })),
        BLOCKS_PER_BATCH,
      );
      for (const outcome of outcomes)
        logs.push(...(resultOf(outcome) as RpcLog[]).map((log) => formatLog(log)));
    }
    return this.#transfersInLogs(logs, watched, (log) => times.get(log.blockNumber ?? 0n) ?? new Date());
  }

  /**
   * Token transfers to watched addresses among logs. The scan and the single-transaction lookup both parse
   * through here, so they always produce the same key (the log's index).
   */
  #transfersInLogs(
    logs: Log[],
    watched: Map<string, string>,
    timeOf: (log: Log) => Date,
  ): IncomingTransfer[] {
    const byAddress = new Map(
      this.config.tokens.flatMap((t) => (t.address === null ? [] : [[t.address.toLowerCase(), t] as const])),
    );
    const transfers: IncomingTransfer[] = [];
    for (const log of parseEventLogs({ abi: [TRANSFER_EVENT], logs, strict: true })) {
      const { from, to, value } = log.args;
      const token = byAddress.get(log.address.toLowerCase());
      const watchedTo = watched.get(to.toLowerCase());
      if (!token || !watchedTo || value === 0n || log.transactionHash === null || log.logIndex === null)
        continue;
      transfers.push({
        txHash: log.transactionHash,
        index: log.logIndex,
        from: getAddress(from),
        to: watchedTo,
        token,
        amount: value,
        blockTime: timeOf(log),
      });
    }
    return transfers;
  }

  async #cursorAt(blockNumber: bigint): Promise<string> {
    const block = await this.#client.getBlock({ blockNumber });
    return `${blockNumber}:${block.hash}`;
  }

  /**
   * The gas limit from the node's estimate. A plain transfer to an account without code costs exactly
   * 21,000; anything else gets a margin. Estimation replays the call against the current state, so a sender
   * not yet holding the amount makes it revert: the limit then falls back to a bound that covers a standard
   * transfer. An endpoint that gave no usable answer is not such a refusal.
   */
  #gasLimit(estimate: ReadOutcome | undefined, native: boolean): bigint {
    if (estimate && "result" in estimate) {
      const gas = hexToBigInt(estimate.result as Hex);
      return native && gas === NATIVE_TRANSFER_GAS ? gas : (gas * 12n) / 10n;
    }
    if (estimate?.error instanceof ChainUnavailableError) throw estimate.error;
    return native ? NATIVE_TRANSFER_GAS : FALLBACK_TOKEN_TRANSFER_GAS;
  }
}

/** A block as a node answers `eth_getBlockByNumber` with its transactions: the fields the scan reads. */
interface RawBlock {
  number: Hex;
  hash: Hash;
  timestamp: Hex;
  logsBloom: Hex;
  transactions: { hash: Hash; from: Address; to: Address | null; value?: Hex }[];
}

/** A block as the scan uses it: its transactions as the node gave them (their values parsed when watched). */
interface ScannedBlock {
  number: bigint;
  hash: Hash;
  timestamp: bigint;
  logsBloom: Hex;
  transactions: RawBlock["transactions"];
}

/**
 * The three bits of a block's 2048-bit logs bloom that `item` (a log's address or one of its topics) sets:
 * three pairs of bytes of its keccak-256, each taken modulo 2048 (the yellow paper's M3:2048).
 */
function bloomBits(item: Hex): number[] {
  const hash = hexToBytes(keccak256(item));
  return [0, 2, 4].map((i) => (((hash[i] ?? 0) << 8) | (hash[i + 1] ?? 0)) & 2047);
}

/** Whether a logs bloom has every one of `bits` set: false means no log of the block holds the item. */
function inBloom(bloom: Uint8Array, bits: number[]): boolean {
  return bits.every((bit) => ((bloom[255 - (bit >> 3)] ?? 0) & (1 << (bit & 7))) !== 0);
}

/**
 * What a mined transaction cost its sender in the native coin, from its receipt: the gas used at the price it
 * paid, and the L1 data fee an OP-stack chain (Base) adds to its receipts as `l1Fee`; undefined when the
 * receipt lacks the price (a node too old to give `effectiveGasPrice`).
 */
function feePaid(receipt: TransactionReceipt): bigint | undefined {
  if (typeof receipt.effectiveGasPrice !== "bigint") return undefined;
  const l1Fee = (receipt as { l1Fee?: unknown }).l1Fee;
  const dataFee = typeof l1Fee === "bigint" ? l1Fee : typeof l1Fee === "string" && l1Fee ? BigInt(l1Fee) : 0n;
  return receipt.gasUsed * receipt.effectiveGasPrice + dataFee;
}

/** One read of a batch: its result, or the chain error the node's refusal stands for. */
type ReadOutcome = { result: unknown } | { error: unknown };

/** The result of a read, or its error thrown. */
function resultOf(outcome: ReadOutcome | undefined): unknown {
  if (outcome === undefined) throw new Error("a batch answered fewer reads than it was asked");
  if ("error" in outcome) throw outcome.error;
  return outcome.result;
}

/** What an EIP-3009 token (USDC) tells of an authorization: its state, and the log of its use. */
export const EIP3009_ABI = parseAbi([
  "function authorizationState(address authorizer, bytes32 nonce) view returns (bool)",
  "event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce)",
]);

/** The read of an EIP-3009 authorization's state at the latest block: `authorizationState(authorizer, nonce)`. */
function authorizationStateCall(authorization: EvmAuthorization): RpcCall {
  const data = encodeFunctionData({
    abi: EIP3009_ABI,
    functionName: "authorizationState",
    args: [getAddress(authorization.authorizer), authorization.nonce],
  });
  return { method: "eth_call", params: [{ to: getAddress(authorization.token), data }, "latest"] };
}

/**
 * Whether an authorization's state read says it was used: false also when the read failed or answered what
 * does not decode (the caller then counts the payment as not yet taken from the balances).
 */
function wasUsed(outcome: ReadOutcome | undefined): boolean {
  if (outcome === undefined || "error" in outcome) return false;
  try {
    return decodeFunctionResult({
      abi: EIP3009_ABI,
      functionName: "authorizationState",
      data: outcome.result as Hex,
    });
  } catch {
    return false;
  }
}

/** The read of `owner`'s balance of `token`: `eth_getBalance`, or an ERC-20 `balanceOf` call. */
function balanceCall(owner: Address, token: TokenInfo): RpcCall {
  if (token.address === null) return { method: "eth_getBalance", params: [owner, "latest"] };
  const data = encodeFunctionData({ abi: erc20Abi, functionName: "balanceOf", args: [owner] });
  return { method: "eth_call", params: [{ to: getAddress(token.address), data }, "latest"] };
}

const readClients = new Map<string, PublicClient>();

/**
 * A viem client of an EVM chain over the chain layer's transport (errors as chain errors, reads retried),
 * one per endpoint and reused, for reads that {@link EvmChain} does not offer (x402's settlement reads).
 * @example await evmReadClient(registry.get("base")!).getBlockNumber()
 */
export function evmReadClient(config: Pick<ChainConfig, "name" | "rpcUrl">): PublicClient {
  const key = `${config.name}\n${config.rpcUrl}`;
  let client = readClients.get(key);
  if (!client) {
    client = createPublicClient({
      transport: chainTransport(
        config.name,
        new JsonRpcEndpoint(config.rpcUrl, { timeoutMs: DEFAULT_TIMEOUT_MS }),
      ),
    });
    readClients.set(key, client);
  }
  return client;
}

/**
 * The CAIP-2 network and the EIP-712 domain of the USDC token of an EVM node, read from the node (for
 * local chains, whose ids are not known in advance).
 * @example await discoverEvmNetwork("base", "http://127.0.0.1:8545", usdc) // { network: "eip155:31337", eip712: {…} }
 */
export async function discoverEvmNetwork(
  chain: string,
  rpcUrl: string,
  usdc: string,
): Promise<{ network: string; eip712: { name: string; version: string } | undefined }> {
  const client = createPublicClient({
    transport: chainTransport(chain, new JsonRpcEndpoint(rpcUrl, { timeoutMs: DEFAULT_TIMEOUT_MS })),
  });
  const chainId = await client.getChainId();
  const token = getAddress(usdc);
  const eip712Abi = [
    { type: "function", name: "name", stateMutability: "view", inputs: [], outputs: [{ type: "string" }] },
    { type: "function", name: "version", stateMutability: "view", inputs: [], outputs: [{ type: "string" }] },
  ] as const;
  const eip712 = await Promise.all([
    client.readContract({ address: token, abi: eip712Abi, functionName: "name" }),
    client.readContract({ address: token, abi: eip712Abi, functionName: "version" }),
  ]).then(
    ([name, version]) => ({ name, version }),
    (error: unknown) => {
      // A token without name() or version() has no EIP-712 domain; an endpoint that did not answer is
      // not an answer.
      const chainError = findChainError(error);
      if (chainError instanceof ChainUnavailableError) throw chainError;
      return undefined;
    },
  );
  return { network: `eip155:${chainId}`, eip712 };
}

/**
 * The chain layer's transport ({@link jsonRpcHttp}): what goes wrong leaves as a chain error
 * (see errors.ts), without the URL's path and query (providers put API keys there; viem's errors keep them
 * in their messages), and an idempotent read is retried after a transient transport failure.
 */
function chainTransport(chain: string, endpoint: JsonRpcEndpoint): Transport {
  const inner = jsonRpcHttp(endpoint);
  return (params) => {
    const transport = inner(params);
    return {
      ...transport,
      request: (args, options) =>
        withReadRetries(READ_METHODS.has(args.method), async () => {
          try {
            return await transport.request(args, options);
          } catch (error) {
            throw chainErrorOf(error, chain, endpoint, args.method);
          }
        }),
    } as ReturnType<Transport>;
  };
}

/**
 * What failed in one call to `endpoint` as the chain error it stands for ({@link toChainError}), without the
 * URL's path and query: the one way the chain layer's calls and batches report a failure.
 */
function chainErrorOf(error: unknown, chain: string, endpoint: JsonRpcEndpoint, method: string): unknown {
  return toChainError(scrubRpcUrl(error, endpoint.url), { chain, method, timeoutMs: endpoint.timeoutMs });
}

/** viem's error from one RPC call as the chain error it stands for; anything else (a bug) unchanged. */
function toChainError(error: unknown, call: { chain: string; method: string; timeoutMs: number }): unknown {
  const { chain, method } = call;
  if (error instanceof TimeoutError) return new ChainTimeoutError(call, error);
  if (error instanceof HttpRequestError) {
    return new ChainUnreachableError(
      {
        chain,
        method,
        ...(error.status === undefined ? {} : { status: error.status }),
        ...(error instanceof NotJsonRpcAnswerError ? { notJsonRpc: true as const } : {}),
      },
      error,
    );
  }
  if (!(error instanceof RpcError || error instanceof RpcRequestError)) return error;
  if (!SEND_METHODS.has(method)) return new ChainRequestError({ chain, method, rpcCode: error.code }, error);
  // viem names what the node said (NonceTooLowError covers "nonce too low" and "already known").
  const named = getNodeError(error, {});
  if (named instanceof NonceTooLowError) return new NonceTakenError({ chain, method }, named);
  const reason = (error.details || named.shortMessage).split("\n")[0]?.slice(0, 200) ?? "rejected";
  // An internal error, a resource unavailable, a limit exceeded: the endpoint's own trouble, not the node's
  // verdict on the transaction, which may have gone on. Any other error is the node refusing it.
  if (named instanceof UnknownNodeError && UNCLEAR_SEND_CODES.has(error.code)) {
    return new UnclearSendError({ chain, method, rpcCode: error.code, reason }, named);
  }
  return new TransactionRejectedError({ chain, method, reason }, named);
}

/** JSON-RPC codes (EIP-1474's) a gateway answers a send with when the trouble is its own. */
const UNCLEAR_SEND_CODES: ReadonlySet<number> = new Set([-32603, -32002, -32005]);

/** The numeric chain id of an `eip155:<id>` network. */
function evmChainId(network: string): number {
  const match = /^eip155:(\d+)$/.exec(network);
  if (!match) throw new Error(`not an EVM CAIP-2 network: ${network}`);
  return Number(match[1]);
}

/** Watched addresses by their lowercase form, each mapped to the form the caller gave. */
function watchSet(addresses: readonly string[]): Map<string, string> {
  return new Map(addresses.map((a) => [a.toLowerCase(), a]));
}

function range(from: bigint, to: bigint): bigint[] {
  const out: bigint[] = [];
  for (let n = from; n <= to; n++) out.push(n);
  return out;
}
