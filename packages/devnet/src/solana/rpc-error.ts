/** A JSON-RPC 2.0 error with a Solana cluster's code, message and optional `data`. */
export class RpcError extends Error {
  override readonly name = "RpcError";
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }
}

/** JSON-RPC error codes a Solana cluster uses. */
export const RPC_ERROR = {
  parseError: -32700,
  invalidRequest: -32600,
  methodNotFound: -32601,
  invalidParams: -32602,
  internalError: -32603,
  /** sendTransaction preflight simulation failed; `data.err` holds the TransactionError. */
  sendTransactionPreflightFailure: -32002,
  transactionSignatureVerificationFailure: -32003,
  blockNotAvailable: -32004,
  transactionVersionNotSupported: -32015,
  minContextSlotNotReached: -32016,
} as const;

/** `-32602` with the cluster's wording. */
export function invalidParams(message: string): RpcError {
  return new RpcError(RPC_ERROR.invalidParams, message);
}
