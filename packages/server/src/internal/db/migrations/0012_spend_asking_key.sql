-- The API key that asked for a spend (NULL when the owner's login did, and for rows from before): revoking
-- the key ends the spends it still holds for approval, found through the partial index.
ALTER TABLE transactions ADD COLUMN requested_by_key_id text;
CREATE INDEX transactions_held_by_key_idx ON transactions (requested_by_key_id) WHERE status = 'pending_approval';
