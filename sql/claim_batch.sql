-- $1 waiters [{"i", "worker", "gpu", "before", "fresh"}], $2 lease seconds, $3 fair share (rungd --fair-share)
-- -> (i, status, attempt id, job id, number, token, LEASE without config and heartbeat_ms, config text,
--     and for a first attempt at the target: arch, GPU memory MiB, kind, recovery options text, and the
--     largest usable GPU memory in the leasing worker's pool; and the waiter's pool, on every row)
SELECT i, status, attempt_id, job_id, number, token, lease, config, init_arch, init_gpu_mib, init_kind, init_recovery,
       init_fleet_mib, pool
FROM rung_claim_round($1::jsonb, $2::int, $3::boolean);
