-- The exact counts behind a history's `total` are kept by the database: the statement that inserts
-- transactions also counts them (an AFTER INSERT trigger over the rows it inserted), whatever inserted them,
-- without a statement of the service's own for each. Rows an ON CONFLICT DO NOTHING skipped are not counted.
CREATE FUNCTION count_inserted_transactions() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO transaction_counts (wallet_id, chain, type, count)
  SELECT wallet_id, chain, type, count(*) FROM inserted GROUP BY wallet_id, chain, type
  ON CONFLICT (wallet_id, chain, type) DO UPDATE SET count = transaction_counts.count + EXCLUDED.count;
  RETURN NULL;
END
$$;

CREATE TRIGGER transactions_counted AFTER INSERT ON transactions
  REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION count_inserted_transactions();
