-- Per-pool owner limits: tokens.pool_limits {"POOL": N} caps how many of that token's jobs of pool
-- POOL (migration 026: the pool a job is queued in, wherever it runs, a borrower's host included)
-- run at once, beside max_running (migration 020), which counts its jobs of every pool. NULL, the
-- default: no per-pool limit. Set by an admin: POST /v1/tokens/{id}/limits {"pool_max_running"}
-- (rung_token_set_limits, sql/functions/90_tokens.sql); the claim weighs it with max_running
-- (rung_owner_room, sql/functions/40_claim.sql). No row is rewritten.
ALTER TABLE tokens ADD COLUMN pool_limits jsonb
  CHECK (pool_limits IS NULL OR (jsonb_typeof(pool_limits) = 'object' AND pool_limits <> '{}'));
