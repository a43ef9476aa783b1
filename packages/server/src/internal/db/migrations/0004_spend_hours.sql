-- The USD each wallet spent per hour (pending and confirmed spends), kept in the same database transaction
-- as each spend and each failure, so the rolling 24 h sum reads at most 25 buckets and one hour of rows,
-- however long the wallet's history.
CREATE TABLE spend_hours (
  wallet_id text NOT NULL REFERENCES wallets (id),
  hour timestamptz NOT NULL,
  usd_micros numeric(38, 0) NOT NULL,
  PRIMARY KEY (wallet_id, hour)
);

INSERT INTO spend_hours (wallet_id, hour, usd_micros)
SELECT wallet_id, date_bin('1 hour', created_at, TIMESTAMPTZ '2000-01-01 00:00:00+00'), sum(usd_micros)
FROM transactions
WHERE type IN ('send', 'x402') AND status IN ('pending', 'confirmed') AND usd_micros IS NOT NULL
GROUP BY 1, 2;
