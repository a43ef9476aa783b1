-- The confirmer reads each chain's pending spends on its own, oldest first: the index of pending rows leads
-- with the chain, so a chain's pass does not scan past the pending rows of the others.
DROP INDEX transactions_pending_idx;
CREATE INDEX transactions_pending_idx ON transactions (chain, created_at) WHERE status = 'pending';
