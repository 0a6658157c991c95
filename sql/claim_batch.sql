-- $1 waiters [{"i", "worker", "gpu", "before", "fresh"}], $2 lease seconds
-- -> (i, status, attempt id, job id, number, token, LEASE without config and heartbeat_ms, config text)
SELECT i, status, attempt_id, job_id, number, token, lease, config FROM rung_claim_batch($1::jsonb, $2::int);
