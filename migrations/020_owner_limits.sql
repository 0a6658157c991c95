-- Per-owner concurrency limits: tokens.max_running caps how many of that token's jobs run at once
-- (NULL: no cap; 0: none of them starts, a pause). An admin sets it (POST /v1/tokens/{id}/limits,
-- rungctl token limit); the claim reads it only when some token has one (rung_owner_room,
-- sql/functions/40_claim.sql), so a fleet without limits pays nothing. Jobs already running when a
-- limit is lowered run to their end; the limit holds for the next claims.
ALTER TABLE tokens ADD COLUMN max_running int CHECK (max_running IS NULL OR max_running >= 0);
