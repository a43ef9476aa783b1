/** Faucet accounts (placeholder until the faucet lands). */
export interface FaucetAccount {
  /** 32-byte secret: secp256k1 (EVM) or ed25519 seed (Solana). */
  privateKey: Uint8Array;
  /** Funds the account before its first payment (the embedded devnet tops up a fresh account). */
  prepare?: () => Promise<void>;
}

/** The faucet's paying account per chain kind, where there is one. */
export interface FaucetAccounts {
  evm?: FaucetAccount;
  solana?: FaucetAccount;
}
