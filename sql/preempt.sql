-- $1 seconds an attempt runs before it may be stopped, $2 at most this many marked, $3 the fair share
-- (rungd --fair-share), $4 the urgent priorities' bound (rungd --preempt-priority; NULL: none) ->
-- [{"attempt_id", "job_id", "number", "worker_id", "gpu_uuid", "pool", "for_job", "why"}]
SELECT rung_preempt_pass($1::int, $2::int, $3::boolean, $4::int);
