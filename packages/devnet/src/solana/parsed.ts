import { getBase58Decoder } from "@solana/kit";
import type { LandedTransaction, RecordedInnerInstruction } from "./ledger.ts";
import {
  ATA_PROGRAM,
  MEMO_PROGRAMS,
  SYSTEM_PROGRAM,
  TOKEN_2022_PROGRAM,
  TOKEN_PROGRAM,
  uiTokenAmount,
} from "./token.ts";
import { isSigner, isWritable, type WireInstruction, type WireTransaction } from "./wire.ts";

const base58 = getBase58Decoder();

function u64(data: Uint8Array, offset: number): bigint | undefined {
  if (data.length < offset + 8) return undefined;
  return new DataView(data.buffer, data.byteOffset, data.byteLength).getBigUint64(offset, true);
}

function u32(data: Uint8Array, offset: number): number | undefined {
  if (data.length < offset + 4) return undefined;
  return new DataView(data.buffer, data.byteOffset, data.byteLength).getUint32(offset, true);
}

type Parsed =
  | { program: string; type: string; info: Record<string, unknown> }
  | { program: string; memo: string };

function parseSystem(data: Uint8Array, accounts: readonly string[]): Parsed | undefined {
  const kind = u32(data, 0);
  if (kind === 2) {
    const lamports = u64(data, 4);
    if (lamports === undefined) return undefined;
    return {
      program: "system",
      type: "transfer",
      info: { destination: accounts[1], lamports, source: accounts[0] },
    };
  }
  if (kind === 0) {
    const lamports = u64(data, 4);
    const space = u64(data, 12);
    if (lamports === undefined || space === undefined || data.length < 52) return undefined;
    return {
      program: "system",
      type: "createAccount",
      info: {
        lamports,
        newAccount: accounts[1],
        owner: base58.decode(data.subarray(20, 52)),
        source: accounts[0],
        space,
      },
    };
  }
  return undefined;
}

function parseToken(data: Uint8Array, accounts: readonly string[], program: string): Parsed | undefined {
  const name = program === TOKEN_2022_PROGRAM ? "spl-token-2022" : "spl-token";
  const tag = data[0];
  if (tag === 3) {
    const amount = u64(data, 1);
    if (amount === undefined) return undefined;
    return {
      program: name,
      type: "transfer",
      info: {
        amount: amount.toString(),
        authority: accounts[2],
        destination: accounts[1],
        source: accounts[0],
      },
    };
  }
  if (tag === 12) {
    const amount = u64(data, 1);
    const decimals = data[9];
    if (amount === undefined || decimals === undefined) return undefined;
    return {
      program: name,
      type: "transferChecked",
      info: {
        authority: accounts[3],
        destination: accounts[2],
        mint: accounts[1],
        source: accounts[0],
        tokenAmount: uiTokenAmount(amount, decimals),
      },
    };
  }
  if (tag === 7) {
    const amount = u64(data, 1);
    if (amount === undefined) return undefined;
    return {
      program: name,
      type: "mintTo",
      info: {
        account: accounts[1],
        amount: amount.toString(),
        mint: accounts[0],
        mintAuthority: accounts[2],
      },
    };
  }
  if (tag === 14) {
    const amount = u64(data, 1);
    const decimals = data[9];
    if (amount === undefined || decimals === undefined) return undefined;
    return {
      program: name,
      type: "mintToChecked",
      info: {
        account: accounts[1],
        mint: accounts[0],
        mintAuthority: accounts[2],
        tokenAmount: uiTokenAmount(amount, decimals),
      },
    };
  }
  if (tag === 18 || tag === 16) {
    return {
      program: name,
      type: tag === 18 ? "initializeAccount3" : "initializeAccount2",
      info: {
        account: accounts[0],
        mint: accounts[1],
        owner: data.length >= 33 ? base58.decode(data.subarray(1, 33)) : undefined,
      },
    };
  }
  if (tag === 20) {
    return {
      program: name,
      type: "initializeMint2",
      info: {
        decimals: data[1],
        mint: accounts[0],
        mintAuthority: data.length >= 34 ? base58.decode(data.subarray(2, 34)) : undefined,
      },
    };
  }
  if (tag === 21) return { program: name, type: "getAccountDataSize", info: { mint: accounts[0] } };
  if (tag === 22) return { program: name, type: "initializeImmutableOwner", info: { account: accounts[0] } };
  return undefined;
}

function parseAta(data: Uint8Array, accounts: readonly string[]): Parsed | undefined {
  const kind = data.length === 0 ? 0 : data[0];
  if (kind !== 0 && kind !== 1) return undefined;
  return {
    program: "spl-associated-token-account",
    type: kind === 0 ? "create" : "createIdempotent",
    info: {
      account: accounts[1],
      mint: accounts[3],
      source: accounts[0],
      systemProgram: accounts[4],
      tokenProgram: accounts[5],
      wallet: accounts[2],
    },
  };
}

function parseInstruction(
  programId: string,
  data: Uint8Array,
  accounts: readonly string[],
): Parsed | undefined {
  if (programId === SYSTEM_PROGRAM) return parseSystem(data, accounts);
  if (programId === TOKEN_PROGRAM || programId === TOKEN_2022_PROGRAM)
    return parseToken(data, accounts, programId);
  if (programId === ATA_PROGRAM) return parseAta(data, accounts);
  if (MEMO_PROGRAMS.includes(programId)) {
    return { program: "spl-memo", memo: new TextDecoder().decode(data) };
  }
  return undefined;
}

/** An instruction in `jsonParsed` form: parsed where the cluster has a parser, else partially decoded. */
function jsonParsedInstruction(
  tx: WireTransaction,
  ix: Pick<WireInstruction, "programIdIndex" | "accounts" | "data">,
  stackHeight: number | null,
): unknown {
  const programId = tx.accountKeys[ix.programIdIndex] ?? "";
  const accounts = ix.accounts.map((i) => tx.accountKeys[i] ?? "");
  const parsed = parseInstruction(programId, ix.data, accounts);
  if (parsed === undefined) {
    return { accounts, data: base58.decode(ix.data), programId, stackHeight };
  }
  if ("memo" in parsed) return { parsed: parsed.memo, program: parsed.program, programId, stackHeight };
  return {
    parsed: { info: parsed.info, type: parsed.type },
    program: parsed.program,
    programId,
    stackHeight,
  };
}

/** The `transaction` object of `getTransaction` in `jsonParsed` encoding. */
export function jsonParsedTransaction(landed: LandedTransaction): unknown {
  const { tx } = landed;
  const message: Record<string, unknown> = {
    accountKeys: tx.accountKeys.map((pubkey, i) => ({
      pubkey,
      signer: isSigner(tx, i),
      source: "transaction",
      writable: isWritable(tx, i),
    })),
    instructions: tx.instructions.map((ix) => jsonParsedInstruction(tx, ix, null)),
    recentBlockhash: tx.recentBlockhash,
  };
  if (tx.version === 0) message.addressTableLookups = jsonLookups(tx);
  return { message, signatures: tx.signatures };
}

/** Inner instructions in `jsonParsed` form (also what `simulateTransaction` returns when asked for them). */
export function jsonParsedInnerInstructions(
  landed: Pick<LandedTransaction, "tx" | "innerInstructions">,
): unknown {
  return landed.innerInstructions.map((entry) => ({
    index: entry.index,
    instructions: entry.instructions.map((ix: RecordedInnerInstruction) =>
      jsonParsedInstruction(landed.tx, ix, ix.stackHeight),
    ),
  }));
}

function jsonLookups(tx: WireTransaction): unknown {
  return tx.addressTableLookups.map((l) => ({
    accountKey: l.accountKey,
    readonlyIndexes: l.readonlyIndexes,
    writableIndexes: l.writableIndexes,
  }));
}

/** The `transaction` object of `getTransaction` in `json` encoding. */
export function jsonTransaction(landed: LandedTransaction): unknown {
  const { tx } = landed;
  const message: Record<string, unknown> = {
    accountKeys: tx.accountKeys,
    header: tx.header,
    instructions: tx.instructions.map((ix) => ({
      accounts: ix.accounts,
      data: base58.decode(ix.data),
      programIdIndex: ix.programIdIndex,
      stackHeight: null,
    })),
    recentBlockhash: tx.recentBlockhash,
  };
  if (tx.version === 0) message.addressTableLookups = jsonLookups(tx);
  return { message, signatures: tx.signatures };
}

/** Inner instructions in `json` form. */
export function jsonInnerInstructions(landed: LandedTransaction): unknown {
  return landed.innerInstructions.map((entry) => ({
    index: entry.index,
    instructions: entry.instructions.map((ix) => ({
      accounts: ix.accounts,
      data: base58.decode(ix.data),
      programIdIndex: ix.programIdIndex,
      stackHeight: ix.stackHeight,
    })),
  }));
}

/** The memo field of `getSignaturesForAddress`: `"[len] text"` per memo instruction, `; `-joined, or null. */
export function memoOf(tx: WireTransaction): string | null {
  const memos: string[] = [];
  for (const ix of tx.instructions) {
    if (MEMO_PROGRAMS.includes(tx.accountKeys[ix.programIdIndex] ?? "")) {
      const text = new TextDecoder().decode(ix.data);
      memos.push(`[${ix.data.length}] ${text}`);
    }
  }
  return memos.length > 0 ? memos.join("; ") : null;
}
