-- GPU-hour quotas per owner: tokens.gpu_hours caps the GPU time its jobs may take over the last
-- gpu_hours_days days (a rolling window, 7 by default); NULL, the default: no quota. Set by an admin:
-- POST /v1/tokens/{id}/limits {"gpu_hours", "gpu_hours_days"} (rung_token_set_limits,
-- sql/functions/90_tokens.sql). What each owner with a quota used is read by a periodic pass
-- (rung_quota_pass, sql/functions/45_quota.sql; rungd's server/quota.c), not by each claim: it is
-- stored in quota_use, a table of its own so that the pass's writes never wait on the token rows a
-- claim round locks. While used >= quota the claim treats the owner as one at its max_running
-- (rung_owner_room): its queued jobs wait, its running ones run on. No row is rewritten.
ALTER TABLE tokens ADD COLUMN gpu_hours real CHECK (gpu_hours IS NULL OR gpu_hours >= 0),
                   ADD COLUMN gpu_hours_days int NOT NULL DEFAULT 7 CHECK (gpu_hours_days BETWEEN 1 AND 90);
CREATE TABLE quota_use (
  token_id bigint PRIMARY KEY REFERENCES tokens (id) ON DELETE CASCADE,
  used_s   double precision NOT NULL,  -- GPU seconds its jobs' attempts took inside the window
  over     boolean NOT NULL,           -- used_s >= gpu_hours * 3600 when read
  read_at  timestamptz NOT NULL
);
