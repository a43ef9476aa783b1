-- What a spend cost its wallet in the chain's native coin beyond its amount, as the chain tells it once the
-- spend landed (confirmed, or failed on chain, which pays its fee too): the network fee and, on Solana, the
-- rent of a token account it opened for its recipient. With it a wallet's history accounts for every unit of
-- the native coin that left it. NULL while the spend has not landed, for one that never did, for receives,
-- for x402 payments (their facilitator pays), and for spends settled before this column.
ALTER TABLE transactions ADD COLUMN fee_atomic numeric(78, 0) CHECK (fee_atomic >= 0);
ALTER TABLE transactions ADD COLUMN fee_token text;
ALTER TABLE transactions ADD COLUMN fee_decimals integer;
