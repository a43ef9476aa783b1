-- An Idempotency-Key was stored as the header's value for a credential that sees every wallet, and as
-- `<key id>:<value>` for an API key bound to some wallets; so a credential for every wallet could send
-- `key_…:x` and land in a bound key's namespace (learn which keys it used, or take one first). Now the
-- account-wide namespace is `:` too: a stored key's first colon ends its namespace, and a key id holds none.
-- Rows of bound keys keep their form; every other row gains the account-wide prefix.
UPDATE idempotency_keys SET key = ':' || key
WHERE position(':' IN key) = 0
   OR split_part(key, ':', 1) NOT IN (SELECT id FROM api_keys WHERE wallet_ids IS NOT NULL);
