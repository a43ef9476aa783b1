-- An address's spends pending on a chain: the funds check under a spend's lock reads its x402 payments
-- pending there (and, before the lock, which of them to read the states of). By the pending rows' index
-- alone it read every spend pending across the service, on every EVM spend.
CREATE INDEX transactions_pending_sender_idx ON transactions (chain, from_address) WHERE status = 'pending';
