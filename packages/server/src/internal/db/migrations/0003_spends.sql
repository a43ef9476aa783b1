-- Spends: the USD each spend reserves against the policy, what is needed to re-broadcast or reconcile it,
-- EVM nonces handed out per wallet, and remembered Idempotency-Key responses.

ALTER TABLE transactions ADD COLUMN usd_micros numeric(38, 0);
ALTER TABLE transactions ADD COLUMN raw_tx text;
ALTER TABLE transactions ADD COLUMN nonce integer;
ALTER TABLE transactions ADD COLUMN last_valid_block_height numeric(20, 0);
ALTER TABLE transactions ADD COLUMN broadcast_at timestamptz;

-- The rolling 24 h window of a wallet's spends that still hold their reservation (pending or confirmed).
CREATE INDEX transactions_spend_window_idx ON transactions (wallet_id, created_at)
  INCLUDE (usd_micros)
  WHERE type IN ('send', 'x402') AND status IN ('pending', 'confirmed');
-- What the confirmer and the start-up reconciliation look at.
CREATE INDEX transactions_pending_idx ON transactions (created_at) WHERE status = 'pending';

-- The next EVM nonce to hand out per wallet address and chain; moved only inside the spend's transaction.
CREATE TABLE evm_nonces (
  chain text NOT NULL,
  address text NOT NULL,
  next_nonce integer NOT NULL,
  PRIMARY KEY (chain, address)
);

CREATE TABLE idempotency_keys (
  account_id text NOT NULL REFERENCES accounts (id),
  key text NOT NULL,
  -- SHA-256 of method, path and body: the same key with another request is refused.
  request_hash text NOT NULL,
  state text NOT NULL CHECK (state IN ('in_progress', 'completed')),
  -- The spend this request recorded, once it has: a crash after that point resumes from it.
  transaction_id text,
  response_status integer,
  response_body jsonb,
  locked_at timestamptz NOT NULL DEFAULT now(),
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, key)
);
