-- Accounts, API keys, wallets with their encrypted keys, spending policies, transactions.
-- Applied identically to PGlite and PostgreSQL.

CREATE TABLE service_keys (
  name text PRIMARY KEY,
  -- A known value encrypted under the master key, so a wrong key is caught at start-up.
  canary bytea NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE accounts (
  id text PRIMARY KEY,
  email text NOT NULL,
  name text,
  password_hash text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX accounts_email_key ON accounts (email);

CREATE TABLE api_keys (
  id text PRIMARY KEY,
  account_id text NOT NULL REFERENCES accounts (id),
  name text NOT NULL,
  key_hash text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  last_used_at timestamptz,
  revoked_at timestamptz
);
CREATE UNIQUE INDEX api_keys_key_hash_key ON api_keys (key_hash);
CREATE INDEX api_keys_account_idx ON api_keys (account_id, created_at DESC);

CREATE TABLE wallets (
  id text PRIMARY KEY,
  account_id text NOT NULL REFERENCES accounts (id),
  name text NOT NULL,
  chains jsonb NOT NULL,
  metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
  evm_address text,
  solana_address text,
  status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'archived')),
  -- The wallet's data key, encrypted under the master key (AES-256-GCM, wallet id as associated data).
  wrapped_data_key bytea NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  archived_at timestamptz
);
CREATE INDEX wallets_account_idx ON wallets (account_id, created_at DESC, id DESC);
CREATE UNIQUE INDEX wallets_evm_address_key ON wallets (evm_address);
CREATE UNIQUE INDEX wallets_solana_address_key ON wallets (solana_address);

CREATE TABLE wallet_keys (
  wallet_id text NOT NULL REFERENCES wallets (id),
  chain_kind text NOT NULL CHECK (chain_kind IN ('evm', 'solana')),
  -- The private key, encrypted under the wallet's data key (wallet id and chain kind as associated data).
  encrypted_private_key bytea NOT NULL,
  PRIMARY KEY (wallet_id, chain_kind)
);

CREATE TABLE wallet_policies (
  wallet_id text PRIMARY KEY REFERENCES wallets (id),
  -- USD amounts in micro-dollars (1 USD = 1,000,000); NULL means no bound.
  max_per_tx_micros numeric(38, 0),
  daily_limit_micros numeric(38, 0),
  alert_above_micros numeric(38, 0),
  whitelist jsonb NOT NULL DEFAULT '[]'::jsonb,
  status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused')),
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE transactions (
  id text PRIMARY KEY,
  wallet_id text NOT NULL REFERENCES wallets (id),
  type text NOT NULL CHECK (type IN ('send', 'receive', 'x402')),
  chain text NOT NULL,
  token text NOT NULL,
  -- Atomic units of the token, and the token's decimals to show them.
  amount_atomic numeric(78, 0) NOT NULL CHECK (amount_atomic >= 0),
  decimals integer NOT NULL,
  from_address text NOT NULL,
  to_address text NOT NULL,
  tx_hash text,
  status text NOT NULL CHECK (status IN ('pending', 'confirmed', 'failed')),
  failure_reason text,
  spend_decision_id text,
  created_at timestamptz NOT NULL DEFAULT now(),
  confirmed_at timestamptz
);
-- Page 1 of a wallet's history, newest first, with and without the chain / type filters.
CREATE INDEX transactions_wallet_idx ON transactions (wallet_id, created_at DESC, id DESC);
CREATE INDEX transactions_wallet_chain_idx ON transactions (wallet_id, chain, created_at DESC, id DESC);
CREATE INDEX transactions_wallet_type_idx ON transactions (wallet_id, type, created_at DESC, id DESC);

-- Exact row counts per wallet, chain and type, kept in the same transaction as each insert, so that
-- `total` stays exact and cheap however long a wallet's history grows.
CREATE TABLE transaction_counts (
  wallet_id text NOT NULL REFERENCES wallets (id),
  chain text NOT NULL,
  type text NOT NULL,
  count bigint NOT NULL,
  PRIMARY KEY (wallet_id, chain, type)
);
