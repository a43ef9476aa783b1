import type { FailedTransactionMetadata } from "litesvm";

/**
 * A `TransactionError` as a Solana cluster's JSON-RPC serialises it: a bare string for unit variants,
 * `{ "InstructionError": [index, "Name" | { "Custom": n }] }`, `{ "InsufficientFundsForRent": { "account_index": n } }`…
 */
export type TransactionErrorJson = string | { readonly [variant: string]: unknown };

// Same order as agave's `TransactionError` / LiteSVM's `TransactionErrorFieldless` (a const enum, which
// isolatedModules cannot read from a .d.ts; hence the copy).
const TRANSACTION_ERRORS = [
  "AccountInUse",
  "AccountLoadedTwice",
  "AccountNotFound",
  "ProgramAccountNotFound",
  "InsufficientFundsForFee",
  "InvalidAccountForFee",
  "AlreadyProcessed",
  "BlockhashNotFound",
  "CallChainTooDeep",
  "MissingSignatureForFee",
  "InvalidAccountIndex",
  "SignatureFailure",
  "InvalidProgramForExecution",
  "SanitizeFailure",
  "ClusterMaintenance",
  "AccountBorrowOutstanding",
  "WouldExceedMaxBlockCostLimit",
  "UnsupportedVersion",
  "InvalidWritableAccount",
  "WouldExceedMaxAccountCostLimit",
  "WouldExceedAccountDataBlockLimit",
  "TooManyAccountLocks",
  "AddressLookupTableNotFound",
  "InvalidAddressLookupTableOwner",
  "InvalidAddressLookupTableData",
  "InvalidAddressLookupTableIndex",
  "InvalidRentPayingAccount",
  "WouldExceedMaxVoteCostLimit",
  "WouldExceedAccountDataTotalLimit",
  "MaxLoadedAccountsDataSizeExceeded",
  "ResanitizationNeeded",
  "InvalidLoadedAccountsDataSizeLimit",
  "UnbalancedTransaction",
  "ProgramCacheHitMaxLimit",
  "CommitCancelled",
] as const;

const INSTRUCTION_ERRORS = [
  "GenericError",
  "InvalidArgument",
  "InvalidInstructionData",
  "InvalidAccountData",
  "AccountDataTooSmall",
  "InsufficientFunds",
  "IncorrectProgramId",
  "MissingRequiredSignature",
  "AccountAlreadyInitialized",
  "UninitializedAccount",
  "UnbalancedInstruction",
  "ModifiedProgramId",
  "ExternalAccountLamportSpend",
  "ExternalAccountDataModified",
  "ReadonlyLamportChange",
  "ReadonlyDataModified",
  "DuplicateAccountIndex",
  "ExecutableModified",
  "RentEpochModified",
  "NotEnoughAccountKeys",
  "AccountDataSizeChanged",
  "AccountNotExecutable",
  "AccountBorrowFailed",
  "AccountBorrowOutstanding",
  "DuplicateAccountOutOfSync",
  "InvalidError",
  "ExecutableDataModified",
  "ExecutableLamportChange",
  "ExecutableAccountNotRentExempt",
  "UnsupportedProgramId",
  "CallDepth",
  "MissingAccount",
  "ReentrancyNotAllowed",
  "MaxSeedLengthExceeded",
  "InvalidSeeds",
  "InvalidRealloc",
  "ComputationalBudgetExceeded",
  "PrivilegeEscalation",
  "ProgramEnvironmentSetupFailure",
  "ProgramFailedToComplete",
  "ProgramFailedToCompile",
  "Immutable",
  "IncorrectAuthority",
  "AccountNotRentExempt",
  "InvalidAccountOwner",
  "ArithmeticOverflow",
  "UnsupportedSysvar",
  "IllegalOwner",
  "MaxAccountsDataAllocationsExceeded",
  "MaxAccountsExceeded",
  "MaxInstructionTraceLengthExceeded",
  "BuiltinProgramsMustConsumeComputeUnits",
  "BorshIoError",
] as const;

function instructionErrorJson(err: unknown): unknown {
  if (typeof err === "number") return INSTRUCTION_ERRORS[err] ?? "GenericError";
  if (typeof err === "object" && err !== null) {
    if ("code" in err && typeof err.code === "number") return { Custom: err.code };
    if ("msg" in err) return "BorshIoError";
  }
  return "GenericError";
}

/** Converts LiteSVM's failure into the cluster's JSON form of the same `TransactionError`. */
export function transactionErrorJson(failed: FailedTransactionMetadata): TransactionErrorJson {
  const err: unknown = failed.err();
  if (typeof err === "number") return TRANSACTION_ERRORS[err] ?? "SanitizeFailure";
  if (typeof err === "object" && err !== null) {
    if ("index" in err && typeof err.index === "number") {
      if ("err" in err && typeof err.err === "function") {
        return { InstructionError: [err.index, instructionErrorJson((err.err as () => unknown).call(err))] };
      }
      return { DuplicateInstruction: err.index };
    }
    if ("accountIndex" in err && typeof err.accountIndex === "number") {
      const variant = String(err).includes("Restricted")
        ? "ProgramExecutionTemporarilyRestricted"
        : "InsufficientFundsForRent";
      return { [variant]: { account_index: err.accountIndex } };
    }
  }
  return "SanitizeFailure";
}

const TRANSACTION_ERROR_MESSAGES: Record<string, string> = {
  AccountInUse: "Account in use",
  AccountNotFound: "Attempt to debit an account but found no record of a prior credit.",
  ProgramAccountNotFound: "Attempt to load a program that does not exist",
  InsufficientFundsForFee: "Insufficient funds for fee",
  InvalidAccountForFee: "This account may not be used to pay transaction fees",
  AlreadyProcessed: "This transaction has already been processed",
  BlockhashNotFound: "Blockhash not found",
  SignatureFailure: "Transaction did not pass signature verification",
  SanitizeFailure: "Transaction failed to sanitize accounts offsets correctly",
};

function instructionErrorMessage(err: unknown): string {
  if (typeof err === "object" && err !== null && "Custom" in err) {
    return `custom program error: 0x${Number(err.Custom).toString(16)}`;
  }
  return String(err)
    .replace(/([a-z])([A-Z])/g, "$1 $2")
    .toLowerCase();
}

/** The cluster's human-readable text of a `TransactionError` (used in `-32002` messages). */
export function transactionErrorMessage(err: TransactionErrorJson): string {
  if (typeof err === "string") {
    return TRANSACTION_ERROR_MESSAGES[err] ?? err.replace(/([a-z])([A-Z])/g, "$1 $2");
  }
  const ie = err.InstructionError;
  if (Array.isArray(ie)) return `Error processing Instruction ${ie[0]}: ${instructionErrorMessage(ie[1])}`;
  const rent = err.InsufficientFundsForRent;
  if (typeof rent === "object" && rent !== null && "account_index" in rent) {
    return `Transaction results in an account (${String(rent.account_index)}) with insufficient funds for rent`;
  }
  return JSON.stringify(err);
}

/**
 * Whether a transaction that failed this way is committed to a block (fee charged, status recorded) on a
 * cluster. Failures found before execution (bad blockhash, duplicate, fee payer checks) never land.
 */
export function landsOnChain(err: TransactionErrorJson): boolean {
  if (typeof err === "string") return false;
  return "InstructionError" in err || "InsufficientFundsForRent" in err;
}
