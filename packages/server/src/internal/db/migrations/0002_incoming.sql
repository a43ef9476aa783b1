-- Incoming transfers and the faucet: where the watcher stands on each chain, the key that records each
-- transfer into a wallet once, and the faucet's payments (its daily caps count them).

-- Which transfer of its transaction a row records (EVM log index or -1 for the value; Solana instruction
-- position). Set for receives; NULL for spends, which the unique key below then never constrains.
ALTER TABLE transactions ADD COLUMN transfer_index integer;
-- One row per transfer and wallet, however many watchers or faucet calls see it.
CREATE UNIQUE INDEX transactions_transfer_key ON transactions (chain, tx_hash, transfer_index, wallet_id);

-- The watcher's progress per chain name and network (a profile switch starts a new cursor). Opaque to the
-- store: the chain layer writes and reads it; it moves only by compare-and-set.
CREATE TABLE chain_cursors (
  chain text NOT NULL,
  network text NOT NULL,
  cursor text NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (chain, network)
);

CREATE TABLE faucet_grants (
  id text PRIMARY KEY,
  wallet_id text NOT NULL REFERENCES wallets (id),
  chain text NOT NULL,
  token text NOT NULL,
  amount_atomic numeric(78, 0) NOT NULL CHECK (amount_atomic > 0),
  tx_hash text,
  created_at timestamptz NOT NULL DEFAULT now()
);
-- The rolling 24 h window a cap looks at.
CREATE INDEX faucet_grants_window_idx ON faucet_grants (wallet_id, chain, token, created_at);
