-- GPU-hour quotas per pool: tokens.pool_gpu_hours caps the GPU time an owner's jobs of each pool named
-- may take over the same window as its quota over every pool (gpu_hours_days): {"h200": 500} is 500
-- H200 hours a week, while the other pools count only toward gpu_hours, if any. NULL, the default: none.
-- Set by an admin: POST /v1/tokens/{id}/limits {"pool_gpu_hours": {POOL: H | null} | null}
-- (rung_token_set_limits merges the pools named, as pool_max_running). A job counts toward the quota of
-- the pool it was queued in, wherever it runs (as the limits per pool, migration 034). The periodic pass
-- (rung_quota_pass, sql/functions/45_quota.sql) stores each pool's use in quota_use.pool_used
-- ({POOL: seconds}) and the pools over their quota in pools_over; the claim gives the owner no room in
-- those pools (rung_owner_room_now's "owner/POOL" key at 0). No row is rewritten.
ALTER TABLE tokens ADD COLUMN pool_gpu_hours jsonb;
ALTER TABLE quota_use ADD COLUMN pool_used jsonb,
                      ADD COLUMN pools_over text[];
