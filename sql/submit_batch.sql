-- $1 submits [{"i", "name", "owner", "kind", "priority", "recovery", "key", "body"}]
-- -> (i, status, job id, JOB without its configs, target_config text, current_config text or NULL = the target)
SELECT i, status, job_id, job, target, current FROM rung_submit_batch($1::jsonb);
