-- $1 seconds a borrowed attempt runs before it may be stopped, $2 at most this many marked, $3 the
-- fair share (rungd --fair-share) -> [{"attempt_id", "job_id", "number", "worker_id", "gpu_uuid",
-- "pool", "for_job"}]
SELECT rung_preempt($1::int, $2::int, $3::boolean);
