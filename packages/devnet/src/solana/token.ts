import { getBase58Decoder } from "@solana/kit";

/** SPL Token program. */
export const TOKEN_PROGRAM = "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA";
/** SPL Token-2022 program. */
export const TOKEN_2022_PROGRAM = "TokenzQdBNbLqP5VEhdkAS5EPFLC1PHnBqCXEpPxuEb";
/** SPL Associated Token Account program. */
export const ATA_PROGRAM = "ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL";
/** System program. */
export const SYSTEM_PROGRAM = "11111111111111111111111111111111";
/** SPL Memo programs (v2 and v1). */
export const MEMO_PROGRAMS: readonly string[] = [
  "MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr",
  "Memo1UhkJRfHyvLMcVucJwxXeuD728EqVDDwQDxFMNo",
];

const ACCOUNT_LEN = 165;
const MINT_LEN = 82;
const base58 = getBase58Decoder();

/** Whether `owner` is one of the SPL token programs. */
export function isTokenProgram(owner: string): boolean {
  return owner === TOKEN_PROGRAM || owner === TOKEN_2022_PROGRAM;
}

function u64(data: Uint8Array, offset: number): bigint {
  return new DataView(data.buffer, data.byteOffset, data.byteLength).getBigUint64(offset, true);
}

function optionKey(data: Uint8Array, offset: number): string | null {
  const tag = new DataView(data.buffer, data.byteOffset, data.byteLength).getUint32(offset, true);
  return tag === 0 ? null : base58.decode(data.subarray(offset + 4, offset + 36));
}

/** A decoded SPL token account (the fields the RPC reports). */
export interface TokenAccountState {
  readonly mint: string;
  readonly owner: string;
  readonly amount: bigint;
  readonly delegate: string | null;
  readonly state: "uninitialized" | "initialized" | "frozen";
  readonly isNative: boolean;
  readonly rentExemptReserve: bigint | null;
  readonly delegatedAmount: bigint;
  readonly closeAuthority: string | null;
}

/** A decoded SPL mint. */
export interface MintState {
  readonly mintAuthority: string | null;
  readonly supply: bigint;
  readonly decimals: number;
  readonly isInitialized: boolean;
  readonly freezeAuthority: string | null;
}

/** Decodes a token account's data, or `null` when the data is not an initialised token account. */
export function decodeTokenAccount(owner: string, data: Uint8Array): TokenAccountState | null {
  if (!isTokenProgram(owner) || data.length < ACCOUNT_LEN) return null;
  // Token-2022 accounts with extensions carry an account-type byte (2 = account) after the base layout.
  if (data.length > ACCOUNT_LEN && data[ACCOUNT_LEN] !== 2) return null;
  const stateByte = data[108];
  if (stateByte === undefined || stateByte === 0) return null;
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const isNative = view.getUint32(109, true) !== 0;
  return {
    mint: base58.decode(data.subarray(0, 32)),
    owner: base58.decode(data.subarray(32, 64)),
    amount: u64(data, 64),
    delegate: optionKey(data, 72),
    state: stateByte === 2 ? "frozen" : "initialized",
    isNative,
    rentExemptReserve: isNative ? u64(data, 113) : null,
    delegatedAmount: u64(data, 121),
    closeAuthority: optionKey(data, 129),
  };
}

/** Decodes a mint's data, or `null` when the data is not an initialised mint. */
export function decodeMint(owner: string, data: Uint8Array): MintState | null {
  if (!isTokenProgram(owner) || data.length < MINT_LEN) return null;
  if (data.length > MINT_LEN && !(data.length > ACCOUNT_LEN && data[ACCOUNT_LEN] === 1)) return null;
  const decimals = data[44];
  if (decimals === undefined || data[45] !== 1) return null;
  return {
    mintAuthority: optionKey(data, 0),
    supply: u64(data, 36),
    decimals,
    isInitialized: true,
    freezeAuthority: optionKey(data, 46),
  };
}

/** The cluster's `UiTokenAmount`. */
export interface UiTokenAmount {
  readonly amount: string;
  readonly decimals: number;
  readonly uiAmount: number | null;
  readonly uiAmountString: string;
}

/** Formats an atomic amount the way the cluster does (`uiAmountString` without trailing zeros). */
export function uiTokenAmount(amount: bigint, decimals: number): UiTokenAmount {
  const scale = 10n ** BigInt(decimals);
  const whole = amount / scale;
  const fraction = (amount % scale).toString().padStart(decimals, "0").replace(/0+$/, "");
  const uiAmountString = fraction.length > 0 ? `${whole}.${fraction}` : `${whole}`;
  return { amount: amount.toString(), decimals, uiAmount: Number(uiAmountString), uiAmountString };
}

/** `jsonParsed` data of a token account, given its mint's decimals. */
export function parsedTokenAccount(account: TokenAccountState, decimals: number, program: string): unknown {
  const info: Record<string, unknown> = {
    isNative: account.isNative,
    mint: account.mint,
    owner: account.owner,
    state: account.state,
    tokenAmount: uiTokenAmount(account.amount, decimals),
  };
  if (account.delegate !== null) {
    info.delegate = account.delegate;
    info.delegatedAmount = uiTokenAmount(account.delegatedAmount, decimals);
  }
  if (account.closeAuthority !== null) info.closeAuthority = account.closeAuthority;
  if (account.rentExemptReserve !== null) {
    info.rentExemptReserve = uiTokenAmount(account.rentExemptReserve, decimals);
  }
  return {
    program: program === TOKEN_2022_PROGRAM ? "spl-token-2022" : "spl-token",
    parsed: { type: "account", info },
    space: ACCOUNT_LEN,
  };
}

/** `jsonParsed` data of a mint. */
export function parsedMint(mint: MintState, program: string, space: number): unknown {
  return {
    program: program === TOKEN_2022_PROGRAM ? "spl-token-2022" : "spl-token",
    parsed: {
      type: "mint",
      info: {
        decimals: mint.decimals,
        freezeAuthority: mint.freezeAuthority,
        isInitialized: mint.isInitialized,
        mintAuthority: mint.mintAuthority,
        supply: mint.supply.toString(),
      },
    },
    space,
  };
}
