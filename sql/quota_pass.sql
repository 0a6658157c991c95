-- The periodic pass of GPU-hour quotas (server/quota.c): rung_quota_pass -> {"read", "capped", "freed", "skipped"?}
SELECT rung_quota_pass();
