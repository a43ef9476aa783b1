-- x402: each signed payment is recorded once. The key is the payment's identity on chain (an EVM
-- authorization's token, payer and nonce; a Solana payment's payer signature), so no two records can be
-- settled by one transfer. NULL for every other transaction, and for payments recorded before: they keep what
-- they hold.
ALTER TABLE transactions ADD COLUMN x402_payment_key text;
CREATE UNIQUE INDEX transactions_x402_payment_key ON transactions (x402_payment_key);
