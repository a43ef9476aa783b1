-- Events older than SVC_EVENT_RETENTION_DAYS are deleted, oldest first, with the delivery records that refer
-- to them; these indexes find them (and serve the deletion's foreign-key checks) without scanning a table.
CREATE INDEX events_created_at_idx ON events (created_at);
CREATE INDEX webhook_deliveries_event_idx ON webhook_deliveries (event_id);
CREATE INDEX webhook_redeliveries_event_idx ON webhook_redeliveries (event_id);
