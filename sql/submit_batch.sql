-- $1 submits [{"i", "name", "owner", "kind", "priority", "recovery", "key", "body"}]
-- -> (i, status, job id, JOB)
SELECT i, status, job_id, job FROM rung_submit_batch($1::jsonb);
