-- A faucet grant claims its payment's transaction before the payment is broadcast, and no two grants can
-- claim one: two instances asked for the same payment at the same moment (same key, recipient, amount,
-- nonce and fees) sign byte-identical transactions, which the chain takes once. Before, both grants recorded
-- the same hash and both requests answered it as their own payment: two grants counted for one payment.
--
-- Grants already sharing a transaction are reduced to one, the earliest: only one payment was made, and the
-- cap counts what was paid. A grant without a transaction (its payment not yet signed) is kept as it is.
-- Writes to the table wait meanwhile (an instance of the release before this one may still be running), so
-- none can add a duplicate between the cleanup and the index.
LOCK TABLE faucet_grants IN SHARE ROW EXCLUSIVE MODE;
DELETE FROM faucet_grants AS later
  USING faucet_grants AS earlier
  WHERE later.chain = earlier.chain
    AND later.tx_hash = earlier.tx_hash
    AND (earlier.created_at, earlier.id) < (later.created_at, later.id);
CREATE UNIQUE INDEX faucet_grants_tx_hash_key ON faucet_grants (chain, tx_hash);
