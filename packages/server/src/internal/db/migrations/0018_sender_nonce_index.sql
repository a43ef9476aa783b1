-- An address's sends by nonce on a chain: the funds check under a spend's lock reads those from the nonce its
-- balances were read at, pending or confirmed since, whatever the wallet's history holds before them.
CREATE INDEX transactions_sender_nonce_idx ON transactions (chain, from_address, nonce) WHERE nonce IS NOT NULL;
