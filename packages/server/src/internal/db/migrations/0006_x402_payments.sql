-- x402 payments: the resource a payment was for, and what identifies the signed payment on chain, so that a
-- payment whose receipt never came is completed from the chain (the EIP-3009 nonce used or past validBefore;
-- the Solana signature landed or its blockhash expired). Both NULL for every other transaction.

ALTER TABLE transactions ADD COLUMN resource text;
ALTER TABLE transactions ADD COLUMN x402_payment jsonb;
