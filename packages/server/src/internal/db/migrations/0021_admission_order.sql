-- The order in which a wallet's spends were admitted: a number handed out under the wallet's spend lock,
-- once the lock is held (sends and x402 payments as they are recorded signed, held spends as they are
-- approved), so a spend admitted after another has the higher one, whichever instance admitted them. The
-- funds check under the lock counts the spends admitted after its balances were read by it: by their
-- dates it missed one admitted by an instance whose clock was behind. NULL for receives, for held spends
-- never approved, and for the transfers filling an EVM nonce gap (sends are counted by their nonces there).
-- One number at a time (CACHE 1, the default): a per-session cache would hand a later spend a lower number.
CREATE SEQUENCE transactions_admission_seq AS bigint CACHE 1;
ALTER TABLE transactions ADD COLUMN admission_seq bigint;
-- The spends recorded before this column, in the order of their dates: one recorded before the upgrade and
-- confirmed since is then counted as a spend admitted before those of the new version.
UPDATE transactions SET admission_seq = ordered.seq
  FROM (SELECT id, row_number() OVER (ORDER BY created_at, id) AS seq FROM transactions
         WHERE type IN ('send', 'x402') AND status IN ('pending', 'confirmed', 'failed')) ordered
 WHERE transactions.id = ordered.id;
SELECT setval('transactions_admission_seq', coalesce(max(admission_seq), 0) + 1, false) FROM transactions;
-- A wallet's spends of a type on a chain in the order admitted: its last, its latest sends (x402 payments
-- admitted after them do not take their places), and those after a given one.
CREATE INDEX transactions_wallet_admission_idx ON transactions (wallet_id, chain, type, admission_seq)
  WHERE admission_seq IS NOT NULL;
