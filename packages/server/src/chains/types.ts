/**
 * The chain layer's contract. Domain code (balances, faucet, watcher, sends) talks to chains only through
 * {@link ChainClient}; nothing above it knows whether a chain is local or public.
 */
import type { ChainKind } from "./registry.ts";

/** A token a chain serves. `address` is null for the native coin. Amounts are always atomic units. */
export interface TokenInfo {
  symbol: string;
  /** ERC-20 contract address (EVM) or SPL mint (Solana); null for the native coin. */
  address: string | null;
  decimals: number;
  /** USD per whole token as a decimal string; absent when no price is known (never guessed). */
  usdPrice?: string;
  /** EIP-712 domain of an EIP-3009 token (EVM USDC), as x402's `extra` carries it. */
  eip712?: { name: string; version: string };
}

/** One chain this deployment serves, as configuration describes it. */
export interface ChainConfig {
  /** Stable API word: `base`, `ethereum`, `arbitrum`, `solana`, `base-sepolia`, `solana-devnet`. */
  name: string;
  kind: ChainKind;
  /** CAIP-2 network id, e.g. `eip155:8453`, `solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp`. */
  network: string;
  rpcUrl: string;
  /** Solana websocket endpoint, when the chain has one. */
  wsUrl?: string;
  nativeToken: TokenInfo;
  /** Tokens other than the native coin (USDC). */
  tokens: TokenInfo[];
  /** A local or test network: the faucet is offered only on these. */
  testnet: boolean;
  /**
   * Blocks (EVM) a transfer must be behind the newest one before it counts as confirmed and before the
   * watcher records it, so a shallow reorganisation cannot undo what was seen. Default 0.
   */
  scanDepth?: number;
  /**
   * The token contracts (mints) of the other chains of this kind the service serves: addresses that are no
   * recipient here (a USDC address copied from another chain's explorer; see `lostAt`).
   */
  tokensElsewhere?: { chain: string; symbol: string; address: string }[];
}

/** A transfer of `amount` of `token` from `from` to `to`, as a caller asks for it. */
export interface TransferInput {
  from: string;
  to: string;
  token: TokenInfo;
  amount: bigint;
}

/** A transfer with what the chain said signing it needs; see {@link ChainClient.planTransfer}. */
export interface TransferPlan extends TransferInput {
  /** Upper bound of the native-coin fee, in atomic units of the native coin. */
  fee: bigint;
  /** EVM: the transaction's fields, and the account's pending nonce when planned. */
  evm?: {
    to: `0x${string}`;
    value: bigint;
    data: `0x${string}` | undefined;
    gas: bigint;
    maxFeePerGas: bigint;
    maxPriorityFeePerGas: bigint;
    pendingNonce: number;
    /** Planned with balances: the nonce at the block the balances were read at (sends from it on are not in them). */
    minedNonce?: number;
  };
  /** Solana: the blockhash the transaction lives by. */
  solana?: { blockhash: string; lastValidBlockHeight: bigint };
  /**
   * Solana: the rent of the recipient's token account when the transfer opens it (part of `fee`). The
   * recipient can close that account and take its rent: it is given to the recipient, as the amount is.
   */
  recipientAccountRent?: bigint;
}

/**
 * An EIP-3009 authorization a wallet signed (an EVM x402 payment, which the resource's facilitator submits), by
 * what identifies it on chain: the token's `authorizationState(authorizer, nonce)` turns true once it is used.
 */
export interface EvmAuthorization {
  token: `0x${string}`;
  authorizer: `0x${string}`;
  nonce: `0x${string}`;
}

/** A plan and the sender's balances, read together; see {@link ChainClient.planTransferWithBalances}. */
export interface TransferPlanWithBalances {
  plan: TransferPlan;
  /** The sender's balance of the token transferred, in its atomic units. */
  balance: bigint;
  /** The sender's balance of the native coin (the same figure when the token is the native coin). */
  nativeBalance: bigint;
  /**
   * EVM: of each authorization asked for, in order, whether it was used by the time the balances were read
   * (read before them in the same request), so already taken from them. False also when its read failed.
   */
  authorizationsUsed?: boolean[];
  /**
   * Solana: of each signature asked for, in order, whether its transaction had landed in a slot the balances
   * were read at or before (read after them), so already taken from them. False also for one not read.
   */
  signaturesLanded?: boolean[];
  /** Solana: the rent of a token account, which a transfer opening its recipient's pays beside its fee. */
  tokenAccountRent?: bigint;
  /**
   * Solana: the least an account may hold unless it holds nothing (its rent exemption) and, when the native
   * coin is sent, what the recipient holds now. The chain refuses a transfer that leaves the paying account
   * (after the fee, and after the transfer) or the recipient with more than nothing but less than that least.
   */
  rentExemption?: { minimum: bigint; recipientBalance: bigint | undefined };
  /**
   * Solana, a token sent: the recipient is an account nobody can sign for. The transfer would create and fill
   * a token account owned by it, lost for good.
   */
  lostRecipient?: LostRecipient;
}

/**
 * A Solana account that owns nothing it is sent: an account of a token program other than a multisig of SPL
 * Token (a token account, its address given for its owner's; a mint; another), a program, or a sysvar.
 */
export type LostRecipient = "token_account" | "mint" | "token_program_other" | "program" | "sysvar";

/** A transfer signed but not yet broadcast: recorded first, so a crash can never lose a broadcast. */
export interface SignedTransfer {
  /** Transaction hash (EVM) or signature (Solana), known before broadcast. */
  txHash: string;
  /** The wire transaction (hex for EVM, base64 for Solana), kept so it can be re-broadcast unchanged. */
  raw: string;
  /** EVM: the nonce it uses. */
  nonce?: number;
  /** Solana: the last block height at which it can still land. */
  lastValidBlockHeight?: bigint;
}

/** A broadcast transfer as the chain finds it: what was signed, and who sent it. */
export interface BroadcastTransfer {
  signed: Pick<SignedTransfer, "txHash" | "nonce" | "lastValidBlockHeight">;
  from: string;
}

/**
 * Where a broadcast transfer stands on chain. Once it has landed (confirmed, or failed there), `fee` is what it
 * took from its sender's native coin beyond the amount it transferred: the network fee (EVM: gas used at its
 * price, and an OP-stack chain's L1 data fee) and, on Solana, the rent of accounts it opened; absent when the
 * chain's answer does not tell it.
 */
export type TransferStatus =
  | { state: "confirmed"; blockTime?: Date; fee?: bigint | undefined }
  | { state: "failed"; reason: string; fee?: bigint | undefined }
  /** Seen, or still able to land: ask again later. */
  | { state: "pending" }
  /** Not on chain and can never land (EVM: nonce used by another tx; Solana: blockhash expired). */
  | { state: "dropped"; reason: string };

/** A transfer into one of the watched addresses, found by history scanning. */
export interface IncomingTransfer {
  txHash: string;
  /**
   * Distinguishes several transfers in one transaction: EVM log index, or -1 for the transaction's own
   * value; Solana position of the instruction in the transaction, inner instructions counted in order.
   */
  index: number;
  from: string;
  to: string;
  token: TokenInfo;
  amount: bigint;
  blockTime: Date;
}

/** The operations domain code needs from a chain. */
export interface ChainClient {
  readonly config: ChainConfig;
  /** True when `address` is a well-formed address on this kind of chain. */
  isValidAddress(address: string): boolean;
  /** Balance of `token` held by `address`, in atomic units. */
  getBalance(address: string, token: TokenInfo): Promise<bigint>;
  /** The latest block number (EVM) or slot (Solana): the cheapest read, to tell whether the node answers. */
  getHead(): Promise<bigint>;
  /**
   * Everything signing a transfer needs from the chain, read now (fees, gas limit and the pending nonce on
   * EVM; a recent blockhash on Solana): the network part of a transfer, done before any database lock is
   * taken. `plan.fee` is the upper bound of the native-coin fee it costs.
   */
  planTransfer(input: TransferInput): Promise<TransferPlan>;
  /**
   * {@link ChainClient.planTransfer} and the sender's balances of the token and of the native coin, read
   * together: what a payer checks its funds and fees against before a lock (EVM: one request to the node,
   * which also reads the state of the sender's `authorizations` still pending, before the balances; Solana:
   * then, after them, the statuses of the sender's transfers still pending, by `signatures`).
   */
  planTransferWithBalances(
    input: TransferInput,
    authorizations?: readonly EvmAuthorization[],
    signatures?: readonly string[],
  ): Promise<TransferPlanWithBalances>;
  /**
   * EVM: what an x402 payment's funds check needs, in one request to the node: whether each of the payer's
   * `authorizations` still pending was used, then the nonce at the latest block and the balance of `token`
   * there (see {@link TransferPlanWithBalances.authorizationsUsed} and {@link TransferPlan.evm}'s `minedNonce`).
   */
  getFundsRead?(
    address: string,
    token: TokenInfo,
    authorizations: readonly EvmAuthorization[],
  ): Promise<{ balance: bigint; minedNonce: number; authorizationsUsed: boolean[] }>;
  /**
   * Solana: what an x402 payment's funds check needs: the balance of `token` held by `address` and, read after
   * it, whether each of `signatures` had landed by the slot it was read at (see
   * {@link TransferPlanWithBalances.signaturesLanded}).
   */
  getBalanceWithLanded?(
    address: string,
    token: TokenInfo,
    signatures: readonly string[],
  ): Promise<{ balance: bigint; signaturesLanded: boolean[] }>;
  /**
   * Signs a planned transfer with the key of `plan.from`. Local: no network call, so it may run under a
   * database lock. Does not broadcast. `privateKey`: EVM 32-byte secp256k1 secret; Solana 32-byte ed25519
   * seed. EVM: `nonce` is the caller's, default the pending nonce read by the plan.
   */
  signTransfer(plan: TransferPlan, privateKey: Uint8Array, nonce?: number): Promise<SignedTransfer>;
  /**
   * Solana: whether a signed transfer (`raw`, as recorded) opens its recipient's token account, so that one
   * signed again for it (a new blockhash) opens it only if the first did, whose rent the policy counted.
   */
  opensRecipientAccount?(raw: string): boolean;
  /** Sends a signed transfer. Broadcasting the same one twice is harmless (the chain dedupes by hash). */
  broadcast(signed: SignedTransfer): Promise<void>;
  /** Where a broadcast transfer stands. */
  getTransferStatus(
    signed: Pick<SignedTransfer, "txHash" | "nonce" | "lastValidBlockHeight">,
    from: string,
  ): Promise<TransferStatus>;
  /**
   * What one request can tell of several broadcast transfers, in order: the status of each that has landed
   * (as {@link ChainClient.getTransferStatus} tells it), undefined for one that has not, or could not be
   * told this way; getTransferStatus decides those. EVM only: their receipts in one batch.
   */
  getLandedStatuses?(transfers: readonly BroadcastTransfer[]): Promise<(TransferStatus | undefined)[]>;
  /** EVM: the next nonce of `address` counting pending transactions. */
  getPendingNonce?(address: string): Promise<number>;
  /** EVM: the next nonce of `address` counting mined transactions only. */
  getMinedNonce?(address: string): Promise<number>;
  /**
   * Incoming native and token transfers to the watched addresses after `cursor` (opaque, persisted by the
   * caller; null for "from now"). Returns the transfers found and the cursor to resume from; `more` when
   * the scan stopped short of the chain's head (one call covers a bounded range): call again at once.
   *
   * `addresses` is asked for after the scan has fixed its upper bound: an address created after that
   * moment can only receive later, so it is in the next scan's range; a list read before the bound was
   * fixed could miss a wallet created (and funded) in between.
   */
  scanIncoming(
    addresses: () => Promise<readonly string[]>,
    cursor: string | null,
  ): Promise<{ transfers: IncomingTransfer[]; cursor: string; more?: boolean }>;
  /**
   * The incoming transfers one known, confirmed transaction made to `addresses`, parsed exactly as
   * {@link ChainClient.scanIncoming} parses it (same `index`), so a caller that records it directly and
   * the watcher produce the same key. Empty while the transaction is not confirmed.
   */
  getIncomingTransfers(txHash: string, addresses: readonly string[]): Promise<IncomingTransfer[]>;
  close?(): Promise<void>;
}
