-- $1 batch limit -> [{"attempt_id", "job_id", "job_state"}]
SELECT rung_reap($1::int);
