-- The event an endpoint's failed attempts (attempts, first_attempt_at) were made at. The event after the
-- cursor is usually that one, but not once the retention sweep has deleted it: the next event then starts
-- with no attempts instead of inheriting them. An endpoint retrying at the upgrade is retrying the first
-- event after its cursor that it receives.
ALTER TABLE webhook_endpoints ADD COLUMN attempts_event_id text;
UPDATE webhook_endpoints e SET attempts_event_id = (
  SELECT v.id FROM events v
  WHERE v.account_id = e.account_id
    AND (v.tx_id, v.seq) > (e.cursor_tx_id, e.cursor_seq)
    AND (e.event_types IS NULL OR v.type = ANY (e.event_types))
  ORDER BY v.tx_id, v.seq
  LIMIT 1)
WHERE e.attempts > 0;
