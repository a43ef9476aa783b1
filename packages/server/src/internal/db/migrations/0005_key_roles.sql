-- Key roles and scopes, and verified spend authorizations.
-- Keys made before roles existed become `agent` keys: an upgrade narrows what an old key can do rather than
-- widening it; the owner logs in (the access token acts as admin) to make admin keys where needed.

ALTER TABLE api_keys ADD COLUMN role text NOT NULL DEFAULT 'agent' CHECK (role IN ('admin', 'agent', 'read'));
-- The wallets the key may see and act on; NULL = every wallet of the account, present and future.
ALTER TABLE api_keys ADD COLUMN wallet_ids jsonb;
ALTER TABLE api_keys ADD COLUMN expires_at timestamptz;

-- A spend must carry a decision verified with the authorization daemon.
ALTER TABLE wallet_policies ADD COLUMN require_spend_authorization boolean NOT NULL DEFAULT false;

-- Decision ids stored before this migration were never checked with the daemon: a transaction shows one only
-- when it was verified, so they go.
UPDATE transactions SET spend_decision_id = NULL WHERE spend_decision_id IS NOT NULL;

-- One verified decision admits one spend, however many requests race with it.
CREATE UNIQUE INDEX transactions_spend_decision_key ON transactions (spend_decision_id)
  WHERE spend_decision_id IS NOT NULL;
