-- Events, written in the same database transaction as the change they report (a transactional outbox), and
-- spends held for an owner's approval.

-- `seq` orders events within a transaction; `tx_id` is the writing transaction's id. A reader only sees events
-- whose transaction is older than every transaction still running (`pg_snapshot_xmin`), in (tx_id, seq)
-- order: no event can later appear before one already read, so a cursor never skips an event that commits
-- late.
CREATE TABLE events (
  seq bigserial PRIMARY KEY,
  id text NOT NULL UNIQUE,
  tx_id bigint NOT NULL DEFAULT (pg_current_xact_id()::text::bigint),
  account_id text NOT NULL REFERENCES accounts (id),
  -- The wallet the event is about; NULL for account-wide events (an API key with every wallet).
  wallet_id text REFERENCES wallets (id),
  type text NOT NULL,
  -- json, not jsonb: the resource keeps its fields in the order the API shows them.
  data json NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX events_account_order_idx ON events (account_id, tx_id, seq);

-- A spend above the policy's approvalAbove waits, reserved against the daily limit and unsigned, for an admin.
ALTER TABLE wallet_policies ADD COLUMN approval_above_micros numeric(38, 0);

ALTER TABLE transactions DROP CONSTRAINT transactions_status_check;
ALTER TABLE transactions ADD CONSTRAINT transactions_status_check
  CHECK (status IN ('pending_approval', 'pending', 'confirmed', 'failed', 'rejected'));
-- pending (waiting) → approved (signed and sent) | rejected | expired; NULL for spends that needed none.
ALTER TABLE transactions ADD COLUMN approval_status text
  CHECK (approval_status IN ('pending', 'approved', 'rejected', 'expired'));
ALTER TABLE transactions ADD COLUMN approval_expires_at timestamptz;
ALTER TABLE transactions ADD COLUMN approval_decided_at timestamptz;
CREATE INDEX transactions_approvals_idx ON transactions (approval_status, created_at) WHERE approval_status IS NOT NULL;

-- A spend waiting for approval holds its reservation like a pending one.
DROP INDEX transactions_spend_window_idx;
CREATE INDEX transactions_spend_window_idx ON transactions (wallet_id, created_at)
  INCLUDE (usd_micros)
  WHERE type IN ('send', 'x402') AND status IN ('pending_approval', 'pending', 'confirmed');
