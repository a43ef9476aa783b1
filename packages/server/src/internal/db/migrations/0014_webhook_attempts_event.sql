-- The event an endpoint's failed attempts (attempts, first_attempt_at) were made at. The event after the
-- cursor is usually that one, but not once the retention sweep has deleted it: the next event then starts
-- with no attempts instead of inheriting them. Rows from before count as no attempts yet.
ALTER TABLE webhook_endpoints ADD COLUMN attempts_event_id text;
