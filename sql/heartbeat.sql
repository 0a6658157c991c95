-- $1 attempt id, $2 token, $3 lease seconds, $4 phase, $5 step, $6 total_steps, $7 memory_used_mib
-- -> one row (cancel) when the attempt is the running one with that token, else none.
WITH a AS (
  UPDATE attempts SET lease_expires_at = now() + make_interval(secs => $3::int), last_heartbeat_at = now(),
    phase = coalesce($4, phase), step = coalesce($5::int, step), total_steps = coalesce($6::int, total_steps),
    memory_used_mib = coalesce($7::int, memory_used_mib)
  WHERE id = $1::bigint AND token = $2 AND state = 'running'
  RETURNING job_id, worker_id),
w AS (UPDATE workers SET last_seen_at = now() WHERE id = (SELECT worker_id FROM a))
SELECT j.cancel_requested FROM a JOIN jobs j ON j.id = a.job_id;
