import { getBase58Decoder } from "@solana/kit";

/** One compiled instruction of a message: indices into the account keys. */
export interface WireInstruction {
  readonly programIdIndex: number;
  readonly accounts: readonly number[];
  readonly data: Uint8Array;
}

/** An address lookup table reference of a v0 message. */
export interface WireLookup {
  readonly accountKey: string;
  readonly writableIndexes: readonly number[];
  readonly readonlyIndexes: readonly number[];
}

/** A transaction parsed from its wire form (legacy or v0), enough for the RPC's answers. */
export interface WireTransaction {
  readonly version: "legacy" | 0;
  /** Base58 signatures in signer order; all-zero signatures included as they are on the wire. */
  readonly signatures: readonly string[];
  readonly signatureBytes: readonly Uint8Array[];
  readonly messageBytes: Uint8Array;
  readonly header: {
    readonly numRequiredSignatures: number;
    readonly numReadonlySignedAccounts: number;
    readonly numReadonlyUnsignedAccounts: number;
  };
  /** Static account keys, base58. */
  readonly accountKeys: readonly string[];
  readonly accountKeyBytes: readonly Uint8Array[];
  readonly recentBlockhash: string;
  readonly instructions: readonly WireInstruction[];
  readonly addressTableLookups: readonly WireLookup[];
}

/** Thrown for bytes that are not a well-formed transaction (the RPC answers -32602). */
export class MalformedTransactionError extends Error {
  override readonly name = "MalformedTransactionError";
}

class Reader {
  private offset = 0;
  constructor(private readonly bytes: Uint8Array) {}

  get position(): number {
    return this.offset;
  }

  u8(): number {
    const value = this.bytes[this.offset];
    if (value === undefined) throw new MalformedTransactionError("unexpected end of transaction bytes");
    this.offset += 1;
    return value;
  }

  shortVec(): number {
    let value = 0;
    for (let shift = 0; shift < 21; shift += 7) {
      const byte = this.u8();
      value |= (byte & 0x7f) << shift;
      if ((byte & 0x80) === 0) return value;
    }
    throw new MalformedTransactionError("bad compact-u16 length");
  }

  take(length: number): Uint8Array {
    if (this.offset + length > this.bytes.length) {
      throw new MalformedTransactionError("unexpected end of transaction bytes");
    }
    const out = this.bytes.subarray(this.offset, this.offset + length);
    this.offset += length;
    return out;
  }

  done(): boolean {
    return this.offset === this.bytes.length;
  }
}

const base58 = getBase58Decoder();

/**
 * Parses a wire transaction (legacy or v0). Checks the structure a validator's sanitizer checks first:
 * signature count matches the header, indices are in range.
 */
export function parseWireTransaction(bytes: Uint8Array): WireTransaction {
  const reader = new Reader(bytes);
  const numSignatures = reader.shortVec();
  const signatureBytes: Uint8Array[] = [];
  for (let i = 0; i < numSignatures; i++) signatureBytes.push(reader.take(64));
  const messageStart = reader.position;
  const first = reader.u8();
  let version: "legacy" | 0 = "legacy";
  let numRequiredSignatures = first;
  if ((first & 0x80) !== 0) {
    const v = first & 0x7f;
    if (v !== 0) throw new MalformedTransactionError(`unsupported transaction version ${v}`);
    version = 0;
    numRequiredSignatures = reader.u8();
  }
  const numReadonlySignedAccounts = reader.u8();
  const numReadonlyUnsignedAccounts = reader.u8();
  const numKeys = reader.shortVec();
  const accountKeyBytes: Uint8Array[] = [];
  for (let i = 0; i < numKeys; i++) accountKeyBytes.push(reader.take(32));
  const recentBlockhash = base58.decode(reader.take(32));
  const numInstructions = reader.shortVec();
  const instructions: WireInstruction[] = [];
  for (let i = 0; i < numInstructions; i++) {
    const programIdIndex = reader.u8();
    const accounts = Array.from(reader.take(reader.shortVec()));
    const data = reader.take(reader.shortVec());
    instructions.push({ programIdIndex, accounts, data });
  }
  const addressTableLookups: WireLookup[] = [];
  if (version === 0) {
    const numLookups = reader.shortVec();
    for (let i = 0; i < numLookups; i++) {
      const accountKey = base58.decode(reader.take(32));
      const writableIndexes = Array.from(reader.take(reader.shortVec()));
      const readonlyIndexes = Array.from(reader.take(reader.shortVec()));
      addressTableLookups.push({ accountKey, writableIndexes, readonlyIndexes });
    }
  }
  if (!reader.done()) throw new MalformedTransactionError("trailing bytes after the message");
  if (numSignatures !== numRequiredSignatures) {
    throw new MalformedTransactionError("Transaction failed to sanitize accounts offsets correctly");
  }
  const loaded = addressTableLookups.reduce(
    (n, l) => n + l.writableIndexes.length + l.readonlyIndexes.length,
    0,
  );
  const totalKeys = numKeys + loaded;
  if (numRequiredSignatures > numKeys || numRequiredSignatures === 0) {
    throw new MalformedTransactionError("Transaction failed to sanitize accounts offsets correctly");
  }
  for (const ix of instructions) {
    if (ix.programIdIndex >= numKeys || ix.programIdIndex === 0 || ix.accounts.some((a) => a >= totalKeys)) {
      throw new MalformedTransactionError("Transaction failed to sanitize accounts offsets correctly");
    }
  }
  return {
    version,
    signatures: signatureBytes.map((s) => base58.decode(s)),
    signatureBytes,
    messageBytes: bytes.subarray(messageStart),
    header: { numRequiredSignatures, numReadonlySignedAccounts, numReadonlyUnsignedAccounts },
    accountKeys: accountKeyBytes.map((k) => base58.decode(k)),
    accountKeyBytes,
    recentBlockhash,
    instructions,
    addressTableLookups,
  };
}

/** Whether static account `index` is writable under the message header. */
export function isWritable(tx: WireTransaction, index: number): boolean {
  const { numRequiredSignatures, numReadonlySignedAccounts, numReadonlyUnsignedAccounts } = tx.header;
  if (index < numRequiredSignatures) return index < numRequiredSignatures - numReadonlySignedAccounts;
  return index < tx.accountKeys.length - numReadonlyUnsignedAccounts;
}

/** Whether static account `index` signs the message. */
export function isSigner(tx: WireTransaction, index: number): boolean {
  return index < tx.header.numRequiredSignatures;
}
