-- Webhook endpoints, the log of every delivery attempt, and redeliveries asked for.

-- An endpoint receives its account's events in (tx_id, seq) order, one at a time: the next is not sent until
-- the current one is acknowledged (2xx) or given up. The cursor is the last event finished; the attempt
-- columns describe the one after it. One instance works an endpoint at a time: it leases the row
-- (lease_owner, leased_until) and every write it makes is conditional on still holding the lease.
CREATE TABLE webhook_endpoints (
  id text PRIMARY KEY,
  account_id text NOT NULL REFERENCES accounts (id),
  url text NOT NULL,
  -- NULL = every event type.
  event_types text[],
  description text,
  -- The signing secret, sealed under the master key (AES-256-GCM, the endpoint id as associated data).
  sealed_secret bytea NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  deleted_at timestamptz,
  -- The last event finished (acknowledged or given up). It starts below every event that committed after
  -- the endpoint; the events visible to `start_snapshot` (committed before the endpoint) are passed over.
  cursor_tx_id bigint NOT NULL,
  cursor_seq bigint NOT NULL,
  start_snapshot text NOT NULL,
  -- The event after the cursor: attempts made, when the first was, when the next is due (NULL = now).
  attempts integer NOT NULL DEFAULT 0,
  first_attempt_at timestamptz,
  next_attempt_at timestamptz,
  lease_owner text,
  leased_until timestamptz
);
CREATE INDEX webhook_endpoints_account_idx ON webhook_endpoints (account_id, created_at) WHERE deleted_at IS NULL;

-- One row per attempt, redeliveries included.
CREATE TABLE webhook_deliveries (
  id bigserial PRIMARY KEY,
  endpoint_id text NOT NULL REFERENCES webhook_endpoints (id),
  event_id text NOT NULL REFERENCES events (id),
  attempt integer NOT NULL,
  -- succeeded (2xx) | failed (another attempt follows, or a redelivery failed) | gave_up (failed, and the
  -- three days of retries are over: the endpoint went on to the next event).
  status text NOT NULL CHECK (status IN ('succeeded', 'failed', 'gave_up')),
  redelivery boolean NOT NULL,
  response_status integer,
  error text,
  at timestamptz NOT NULL
);
CREATE INDEX webhook_deliveries_endpoint_idx ON webhook_deliveries (endpoint_id, id);

-- Events an admin asked to send again, each one attempt, outside the endpoint's order.
CREATE TABLE webhook_redeliveries (
  id bigserial PRIMARY KEY,
  endpoint_id text NOT NULL REFERENCES webhook_endpoints (id),
  event_id text NOT NULL REFERENCES events (id),
  requested_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_redeliveries_endpoint_idx ON webhook_redeliveries (endpoint_id, id);
