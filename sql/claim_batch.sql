-- $1 waiters [{"i", "worker", "gpu", "before", "fresh"}], $2 lease seconds
-- -> (i, status, attempt id, job id, number, token, LEASE without heartbeat_ms)
SELECT i, status, attempt_id, job_id, number, token, lease FROM rung_claim_batch($1::jsonb, $2::int);
