-- The exact counts behind a history's `total` are kept by the database: the statement that inserts
-- transactions also counts them (an AFTER INSERT trigger over the rows it inserted), whatever inserted them,
-- without a statement of the service's own for each. Rows an ON CONFLICT DO NOTHING skipped are not counted.
--
-- The counts move to a new table, built here from the rows themselves, so that an upgrade across this
-- migration is safe with several instances on one database: an instance of the previous release still adds
-- to transaction_counts itself, and counting its inserts here too would count them twice. Until every
-- instance runs this release, the previous release's totals may lag; transaction_counts is unused from now
-- on and a later release drops it.
CREATE TABLE history_counts (
  wallet_id text NOT NULL REFERENCES wallets (id),
  chain text NOT NULL,
  type text NOT NULL,
  count bigint NOT NULL,
  PRIMARY KEY (wallet_id, chain, type)
);

CREATE FUNCTION count_inserted_transactions() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO history_counts (wallet_id, chain, type, count)
  SELECT wallet_id, chain, type, count(*) FROM inserted GROUP BY wallet_id, chain, type
  ON CONFLICT (wallet_id, chain, type) DO UPDATE SET count = history_counts.count + EXCLUDED.count;
  RETURN NULL;
END
$$;

-- Creating the trigger locks out inserts until this migration commits, so the counts taken below miss none
-- and count none twice.
CREATE TRIGGER transactions_counted AFTER INSERT ON transactions
  REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION count_inserted_transactions();

INSERT INTO history_counts (wallet_id, chain, type, count)
SELECT wallet_id, chain, type, count(*) FROM transactions GROUP BY wallet_id, chain, type;
