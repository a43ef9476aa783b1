-- Rotating an endpoint's signing secret: the secret it replaced, sealed as the secret is, signs each delivery
-- beside the new one until previous_secret_expires_at, so a receiver moves to the new one without a delivery
-- it cannot verify. Both NULL when there is none (every endpoint before).
ALTER TABLE webhook_endpoints ADD COLUMN sealed_previous_secret bytea;
ALTER TABLE webhook_endpoints ADD COLUMN previous_secret_expires_at timestamptz;
