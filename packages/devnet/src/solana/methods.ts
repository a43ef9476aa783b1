import { createHash } from "node:crypto";
import { getBase58Decoder, getBase58Encoder, isAddress, type ReadonlyUint8Array } from "@solana/kit";
import type { AccountSnapshot, Commitment, LandedTransaction, SolanaLedger } from "./ledger.ts";
import {
  jsonInnerInstructions,
  jsonParsedInnerInstructions,
  jsonParsedTransaction,
  jsonTransaction,
  memoOf,
} from "./parsed.ts";
import { invalidParams, RPC_ERROR, RpcError } from "./rpc-error.ts";
import {
  decodeMint,
  decodeTokenAccount,
  isTokenProgram,
  parsedMint,
  parsedTokenAccount,
  uiTokenAmount,
} from "./token.ts";

/** What the JSON-RPC methods need besides the ledger. */
export interface MethodContext {
  readonly ledger: SolanaLedger;
  /** Pays `lamports` from the faucet to `to`; returns the transaction signature. */
  readonly airdrop: (to: string, lamports: bigint) => Promise<string>;
}

/** A JSON-RPC method: positional params in, result out (may throw {@link RpcError}). */
export type Method = (params: readonly unknown[], ctx: MethodContext) => unknown;

const API_VERSION = "2.3.0";
const RENT_EPOCH_EXEMPT = 18446744073709551615n;
const base58Decoder = getBase58Decoder();
const base58Encoder = getBase58Encoder();

/** A stable genesis hash for the local cluster (no public cluster has it). */
export const GENESIS_HASH: string = base58Decoder.decode(
  createHash("sha256").update("svc-devnet genesis").digest(),
);

type Config = Record<string, unknown>;

function config(params: readonly unknown[], index: number): Config {
  const value = params[index];
  if (value === undefined || value === null) return {};
  if (typeof value !== "object" || Array.isArray(value)) {
    throw invalidParams(`Invalid params: invalid type: expected a map at position ${index}`);
  }
  return value as Config;
}

function commitment(cfg: Config, allowProcessed = true): Commitment {
  const value = cfg.commitment ?? cfg.preflightCommitment;
  if (value === undefined) return "finalized";
  if (value === "processed" || value === "confirmed" || value === "finalized") {
    if (value === "processed" && !allowProcessed) {
      throw invalidParams("Method does not support commitment below `confirmed`");
    }
    return value;
  }
  throw invalidParams(
    `Invalid params: unknown variant \`${String(value)}\`, expected one of \`processed\`, \`confirmed\`, \`finalized\`.`,
  );
}

function checkMinContextSlot(ctx: MethodContext, cfg: Config, c: Commitment): void {
  const min = cfg.minContextSlot;
  if (typeof min === "number" && BigInt(min) > ctx.ledger.slotAt(c)) {
    throw new RpcError(RPC_ERROR.minContextSlotNotReached, "Minimum context slot has not been reached", {
      contextSlot: ctx.ledger.slotAt(c),
    });
  }
}

function stringParam(params: readonly unknown[], index: number, what: string): string {
  const value = params[index];
  if (typeof value !== "string") {
    throw invalidParams(
      value === undefined
        ? "Invalid params: invalid length 0, expected at least 1 parameter."
        : `Invalid params: invalid type: expected a string (${what}).`,
    );
  }
  return value;
}

function addressParam(params: readonly unknown[], index: number): string {
  const value = stringParam(params, index, "pubkey");
  if (!isAddress(value)) throw invalidParams("Invalid param: Invalid");
  return value;
}

function signatureParam(params: readonly unknown[], index: number): string {
  const value = stringParam(params, index, "signature");
  let bytes: ReadonlyUint8Array | undefined;
  try {
    bytes = base58Encoder.encode(value);
  } catch {
    bytes = undefined;
  }
  if (bytes?.length !== 64) throw invalidParams("Invalid param: Invalid");
  return value;
}

function u64Param(params: readonly unknown[], index: number, what: string): bigint {
  const value = params[index];
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0) {
    throw invalidParams(`Invalid params: invalid type: expected u64 (${what}).`);
  }
  return BigInt(value);
}

function context(ctx: MethodContext, c: Commitment): { apiVersion: string; slot: bigint } {
  return { apiVersion: API_VERSION, slot: ctx.ledger.slotAt(c) };
}

function decodeBinary(value: string, encoding: unknown): Uint8Array {
  if (encoding === undefined || encoding === "base58") {
    try {
      return Uint8Array.from(base58Encoder.encode(value));
    } catch {
      throw invalidParams(`invalid base58 encoding: ${value.slice(0, 16)}…`);
    }
  }
  if (encoding === "base64") {
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(value) || value.length % 4 !== 0) {
      throw invalidParams("invalid base64 encoding: InvalidByte");
    }
    return new Uint8Array(Buffer.from(value, "base64"));
  }
  throw invalidParams(
    `Invalid params: unknown variant \`${String(encoding)}\`, expected \`base58\` or \`base64\`.`,
  );
}

function mintDecimals(ctx: MethodContext, mint: string): number | undefined {
  const account = ctx.ledger.account(mint);
  if (account === null) return undefined;
  return decodeMint(account.owner, account.data)?.decimals;
}

/** An account in the cluster's `UiAccount` form for the requested encoding. */
export function encodeAccount(ctx: MethodContext, account: AccountSnapshot, cfg: Config): unknown {
  const encoding = cfg.encoding ?? "base58";
  let data = account.data;
  const slice = cfg.dataSlice;
  if (typeof slice === "object" && slice !== null && "offset" in slice && "length" in slice) {
    const offset = Number(slice.offset);
    data = data.subarray(offset, offset + Number(slice.length));
  }
  let encoded: unknown;
  if (encoding === "jsonParsed") {
    const token = decodeTokenAccount(account.owner, account.data);
    const decimals = token === null ? undefined : mintDecimals(ctx, token.mint);
    const mint = token === null ? decodeMint(account.owner, account.data) : null;
    if (token !== null && decimals !== undefined)
      encoded = parsedTokenAccount(token, decimals, account.owner);
    else if (mint !== null) encoded = parsedMint(mint, account.owner, account.data.length);
    else encoded = [Buffer.from(data).toString("base64"), "base64"];
  } else if (encoding === "base64") {
    encoded = [Buffer.from(data).toString("base64"), "base64"];
  } else if (encoding === "base58" || encoding === "binary") {
    if (data.length > 128) {
      throw new RpcError(
        RPC_ERROR.invalidRequest,
        "Encoded binary (base 58) data should be less than 128 bytes, please use Base64 encoding.",
      );
    }
    const text = base58Decoder.decode(data);
    encoded = encoding === "binary" ? text : [text, "base58"];
  } else if (encoding === "base64+zstd") {
    throw invalidParams("Invalid params: base64+zstd is not supported by this local devnet; use base64.");
  } else {
    throw invalidParams(`Invalid params: unknown variant \`${String(encoding)}\`.`);
  }
  return {
    data: encoded,
    executable: account.executable,
    lamports: account.lamports,
    owner: account.owner,
    rentEpoch: RENT_EPOCH_EXEMPT,
    space: BigInt(account.data.length),
  };
}

function statusOf(ctx: MethodContext, landed: LandedTransaction): unknown {
  const { status, confirmations } = ctx.ledger.confirmationOf(landed.slot);
  return {
    confirmationStatus: status,
    confirmations,
    err: landed.err,
    slot: landed.slot,
    status: landed.err === null ? { Ok: null } : { Err: landed.err },
  };
}

function transactionResult(landed: LandedTransaction, cfg: Config): unknown {
  const encoding = cfg.encoding ?? "json";
  const maxVersion = cfg.maxSupportedTransactionVersion;
  if (landed.tx.version === 0 && maxVersion === undefined) {
    throw new RpcError(
      RPC_ERROR.transactionVersionNotSupported,
      'Transaction version (0) is not supported by the requesting client. Please try the request again with the following configuration parameter: "maxSupportedTransactionVersion": 0',
    );
  }
  let transaction: unknown;
  let innerInstructions: unknown;
  if (encoding === "json") {
    transaction = jsonTransaction(landed);
    innerInstructions = jsonInnerInstructions(landed);
  } else if (encoding === "jsonParsed") {
    transaction = jsonParsedTransaction(landed);
    innerInstructions = jsonParsedInnerInstructions(landed);
  } else if (encoding === "base64") {
    transaction = [Buffer.from(landed.wire).toString("base64"), "base64"];
    innerInstructions = jsonInnerInstructions(landed);
  } else if (encoding === "base58") {
    transaction = [base58Decoder.decode(landed.wire), "base58"];
    innerInstructions = jsonInnerInstructions(landed);
  } else {
    throw invalidParams(`Invalid params: unknown variant \`${String(encoding)}\`.`);
  }
  const result: Record<string, unknown> = {
    blockTime: landed.blockTime,
    meta: {
      computeUnitsConsumed: landed.computeUnitsConsumed,
      err: landed.err,
      fee: landed.fee,
      innerInstructions,
      loadedAddresses: { readonly: [], writable: [] },
      logMessages: landed.logs,
      postBalances: landed.postBalances,
      postTokenBalances: landed.postTokenBalances,
      preBalances: landed.preBalances,
      preTokenBalances: landed.preTokenBalances,
      rewards: [],
      status: landed.err === null ? { Ok: null } : { Err: landed.err },
    },
    slot: landed.slot,
    transaction,
  };
  if (maxVersion !== undefined) result.version = landed.tx.version;
  return result;
}

function tokenAccountsByOwner(params: readonly unknown[], ctx: MethodContext): unknown {
  const owner = addressParam(params, 0);
  const filter = config(params, 1);
  const cfg = config(params, 2);
  const c = commitment(cfg);
  let program: string;
  let mint: string | undefined;
  if (typeof filter.mint === "string") {
    mint = filter.mint;
    const mintAccount = isAddress(mint) ? ctx.ledger.account(mint) : null;
    if (mintAccount === null || decodeMint(mintAccount.owner, mintAccount.data) === null) {
      throw invalidParams("Invalid param: could not find mint");
    }
    program = mintAccount.owner;
  } else if (typeof filter.programId === "string") {
    program = filter.programId;
    if (!isTokenProgram(program)) throw invalidParams("Invalid param: unrecognized Token program id");
  } else {
    throw invalidParams("Invalid params: expected `mint` or `programId` filter");
  }
  const value = ctx.ledger
    .programAccounts(program)
    .filter(({ account }) => {
      const state = decodeTokenAccount(account.owner, account.data);
      return state !== null && state.owner === owner && (mint === undefined || state.mint === mint);
    })
    .map(({ address, account }) => ({ account: encodeAccount(ctx, account, cfg), pubkey: address }));
  return { context: context(ctx, c), value };
}

function matchesFilters(data: Uint8Array, filters: unknown): boolean {
  if (filters === undefined) return true;
  if (!Array.isArray(filters) || filters.length > 4) {
    throw invalidParams("Invalid params: too many filters provided; max 4");
  }
  return filters.every((filter: unknown) => {
    if (typeof filter !== "object" || filter === null) throw invalidParams("Invalid params: bad filter");
    if ("dataSize" in filter) return data.length === Number(filter.dataSize);
    if ("memcmp" in filter && typeof filter.memcmp === "object" && filter.memcmp !== null) {
      const { offset, bytes, encoding } = filter.memcmp as Record<string, unknown>;
      if (typeof bytes !== "string") throw invalidParams("Invalid params: memcmp.bytes must be a string");
      const wanted = decodeBinary(bytes, encoding ?? "base58");
      const start = Number(offset ?? 0);
      if (start + wanted.length > data.length) return false;
      return wanted.every((byte, i) => data[start + i] === byte);
    }
    throw invalidParams("Invalid params: unknown filter");
  });
}

/** The cluster methods this devnet answers, by name. */
export const METHODS: Record<string, Method> = {
  getHealth: () => "ok",
  getVersion: () => ({ "feature-set": 3294202862, "solana-core": API_VERSION }),
  getGenesisHash: () => GENESIS_HASH,
  getIdentity: () => ({ identity: GENESIS_HASH }),
  getSlot: (params, ctx) => {
    const cfg = config(params, 0);
    return ctx.ledger.slotAt(commitment(cfg));
  },
  getBlockHeight: (params, ctx) => {
    const cfg = config(params, 0);
    return ctx.ledger.blockHeightAt(commitment(cfg));
  },
  getTransactionCount: (_params, ctx) => ctx.ledger.processedTransactionCount,
  getEpochInfo: (params, ctx) => {
    const c = commitment(config(params, 0));
    const slot = ctx.ledger.slotAt(c);
    return {
      absoluteSlot: slot,
      blockHeight: ctx.ledger.blockHeightAt(c),
      epoch: 0n,
      slotIndex: slot,
      slotsInEpoch: 432000n,
      transactionCount: ctx.ledger.processedTransactionCount,
    };
  },
  getLatestBlockhash: (params, ctx) => {
    const cfg = config(params, 0);
    const c = commitment(cfg);
    checkMinContextSlot(ctx, cfg, c);
    return { context: context(ctx, c), value: ctx.ledger.latestBlockhash(c) };
  },
  isBlockhashValid: (params, ctx) => {
    const blockhash = stringParam(params, 0, "blockhash");
    const c = commitment(config(params, 1));
    return { context: context(ctx, c), value: ctx.ledger.isBlockhashValid(blockhash) };
  },
  getFeeForMessage: (params, ctx) => {
    const message = decodeBinary(stringParam(params, 0, "message"), "base64");
    const c = commitment(config(params, 1));
    const first = message[0] ?? 0;
    const required = (first & 0x80) !== 0 ? (message[1] ?? 0) : first;
    const wire = new Uint8Array(1 + 64 * required + message.length);
    wire[0] = required;
    wire.set(message, 1 + 64 * required);
    const tx = ctx.ledger.parse(wire);
    const value = ctx.ledger.lifetimeIsValid(tx) ? ctx.ledger.feeFor(tx) : null;
    return { context: context(ctx, c), value };
  },
  getRecentPrioritizationFees: () => [],
  getMinimumBalanceForRentExemption: (params, ctx) => {
    const length = u64Param(params, 0, "data length");
    return ctx.ledger.svm.minimumBalanceForRentExemption(length);
  },
  getBalance: (params, ctx) => {
    const address = addressParam(params, 0);
    const cfg = config(params, 1);
    const c = commitment(cfg);
    checkMinContextSlot(ctx, cfg, c);
    return { context: context(ctx, c), value: ctx.ledger.account(address)?.lamports ?? 0n };
  },
  getAccountInfo: (params, ctx) => {
    const address = addressParam(params, 0);
    const cfg = config(params, 1);
    const c = commitment(cfg);
    checkMinContextSlot(ctx, cfg, c);
    const account = ctx.ledger.account(address);
    return { context: context(ctx, c), value: account === null ? null : encodeAccount(ctx, account, cfg) };
  },
  getMultipleAccounts: (params, ctx) => {
    const list = params[0];
    if (!Array.isArray(list)) throw invalidParams("Invalid params: invalid type: expected a sequence.");
    if (list.length > 100) throw invalidParams("Too many inputs provided; max 100");
    const cfg = config(params, 1);
    const c = commitment(cfg);
    const value = list.map((_, i) => {
      const account = ctx.ledger.account(addressParam(list, i));
      return account === null ? null : encodeAccount(ctx, account, cfg);
    });
    return { context: context(ctx, c), value };
  },
  getTokenAccountBalance: (params, ctx) => {
    const address = addressParam(params, 0);
    const c = commitment(config(params, 1));
    const account = ctx.ledger.account(address);
    if (account === null) throw invalidParams("Invalid param: could not find account");
    const token = decodeTokenAccount(account.owner, account.data);
    if (token === null) throw invalidParams("Invalid param: not a Token account");
    const decimals = mintDecimals(ctx, token.mint);
    if (decimals === undefined) throw invalidParams("Invalid param: could not find mint");
    return { context: context(ctx, c), value: uiTokenAmount(token.amount, decimals) };
  },
  getTokenSupply: (params, ctx) => {
    const address = addressParam(params, 0);
    const c = commitment(config(params, 1));
    const account = ctx.ledger.account(address);
    const mint = account === null ? null : decodeMint(account.owner, account.data);
    if (mint === null) throw invalidParams("Invalid param: not a Token mint");
    return { context: context(ctx, c), value: uiTokenAmount(mint.supply, mint.decimals) };
  },
  getTokenAccountsByOwner: tokenAccountsByOwner,
  getProgramAccounts: (params, ctx) => {
    const program = addressParam(params, 0);
    const cfg = config(params, 1);
    const c = commitment(cfg);
    const value = ctx.ledger
      .programAccounts(program)
      .filter(({ account }) => matchesFilters(account.data, cfg.filters))
      .map(({ address, account }) => ({ account: encodeAccount(ctx, account, cfg), pubkey: address }));
    return cfg.withContext === true ? { context: context(ctx, c), value } : value;
  },
  getBlockTime: (params, ctx) => {
    const slot = u64Param(params, 0, "slot");
    const time = ctx.ledger.blockTime(slot);
    if (time === undefined) {
      throw new RpcError(RPC_ERROR.blockNotAvailable, `Block not available for slot ${slot}`);
    }
    return time;
  },
  getSignatureStatuses: (params, ctx) => {
    const list = params[0];
    if (!Array.isArray(list)) throw invalidParams("Invalid params: invalid type: expected a sequence.");
    if (list.length > 256) throw invalidParams("Too many inputs provided; max 256");
    const value = list.map((_, i) => {
      const signature = signatureParam(list, i);
      const landed = ctx.ledger.transaction(signature, "processed");
      return landed === undefined ? null : statusOf(ctx, landed);
    });
    return { context: context(ctx, "processed"), value };
  },
  getSignaturesForAddress: (params, ctx) => {
    const address = addressParam(params, 0);
    const cfg = config(params, 1);
    const c = commitment(cfg, false);
    checkMinContextSlot(ctx, cfg, c);
    const limit = cfg.limit === undefined ? 1000 : Number(cfg.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw invalidParams("Invalid limit; max 1000");
    let list = ctx.ledger.transactionsFor(address, c);
    if (cfg.before !== undefined) signatureParam([cfg.before], 0);
    if (cfg.until !== undefined) signatureParam([cfg.until], 0);
    if (typeof cfg.before === "string") {
      const at = list.findIndex((t) => t.signature === cfg.before);
      list = at === -1 ? [] : list.slice(at + 1);
    }
    if (typeof cfg.until === "string") {
      const at = list.findIndex((t) => t.signature === cfg.until);
      if (at !== -1) list = list.slice(0, at);
    }
    return list.slice(0, limit).map((t) => ({
      blockTime: t.blockTime,
      confirmationStatus: ctx.ledger.confirmationOf(t.slot).status,
      err: t.err,
      memo: memoOf(t.tx),
      signature: t.signature,
      slot: t.slot,
    }));
  },
  getTransaction: (params, ctx) => {
    const signature = signatureParam(params, 0);
    const raw = params[1];
    // Older clients pass the encoding as a bare string.
    const cfg: Config = typeof raw === "string" ? { encoding: raw } : config(params, 1);
    const c = commitment(cfg, false);
    const landed = ctx.ledger.transaction(signature, c);
    return landed === undefined ? null : transactionResult(landed, cfg);
  },
  sendTransaction: (params, ctx) => {
    const cfg = config(params, 1);
    const wire = decodeBinary(stringParam(params, 0, "transaction"), cfg.encoding);
    commitment(cfg);
    return ctx.ledger.send(wire, { skipPreflight: cfg.skipPreflight === true });
  },
  simulateTransaction: (params, ctx) => {
    const cfg = config(params, 1);
    const c = commitment(cfg);
    const wire = decodeBinary(stringParam(params, 0, "transaction"), cfg.encoding);
    const sigVerify = cfg.sigVerify === true;
    const replace = cfg.replaceRecentBlockhash === true;
    if (sigVerify && replace) {
      throw invalidParams("sigVerify may not be used with replaceRecentBlockhash");
    }
    const tx = ctx.ledger.parse(wire);
    if (sigVerify && !ctx.ledger.signaturesValid(tx)) {
      throw new RpcError(
        RPC_ERROR.transactionSignatureVerificationFailure,
        "Transaction signature verification failure",
      );
    }
    const outcome = ctx.ledger.simulate(tx, wire, { replaceRecentBlockhash: replace });
    let accounts: unknown = null;
    const wanted = cfg.accounts;
    if (
      typeof wanted === "object" &&
      wanted !== null &&
      "addresses" in wanted &&
      Array.isArray(wanted.addresses)
    ) {
      const accountCfg: Config =
        "encoding" in wanted ? { encoding: wanted.encoding } : { encoding: "base64" };
      accounts = wanted.addresses.map((_, i) => {
        const address = addressParam(wanted.addresses as unknown[], i);
        const account = outcome.postAccounts.get(address) ?? ctx.ledger.account(address);
        return account === null ? null : encodeAccount(ctx, account, accountCfg);
      });
    }
    return {
      context: context(ctx, c),
      value: {
        accounts,
        err: outcome.err,
        innerInstructions:
          cfg.innerInstructions === true
            ? jsonParsedInnerInstructions({ tx, innerInstructions: outcome.innerInstructions })
            : null,
        loadedAccountsDataSize: 0,
        logs: outcome.logs,
        replacementBlockhash: replace ? ctx.ledger.latestBlockhash("processed") : null,
        returnData:
          outcome.returnData === null
            ? null
            : {
                data: [Buffer.from(outcome.returnData.data).toString("base64"), "base64"],
                programId: outcome.returnData.programId,
              },
        unitsConsumed: outcome.unitsConsumed,
      },
    };
  },
  requestAirdrop: async (params, ctx) => {
    const address = addressParam(params, 0);
    const lamports = u64Param(params, 1, "lamports");
    return ctx.airdrop(address, lamports);
  },
};
