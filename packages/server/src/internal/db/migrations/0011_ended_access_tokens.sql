-- Access tokens their owner ended by logging out (POST /v1/auth/logout) before they expired, by their `jti`:
-- refused from then on. A row is kept only until its token would have expired anyway.
CREATE TABLE ended_access_tokens (
  jti text PRIMARY KEY,
  expires_at timestamptz NOT NULL
);
CREATE INDEX ended_access_tokens_expires_at ON ended_access_tokens (expires_at);
