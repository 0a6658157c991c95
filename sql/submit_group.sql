-- $1 [{"i": 0, "jobs": [ITEM, ...], "request": the request as sent}]: one batch of jobs submitted all
-- or none (POST /v1/jobs/batch; ITEM as sql/submit_batch.sql's without "body", with "after_items"?) -> (i: the job's index in the batch, status,
-- job id, JOB without its configs, target_config text, current_config text or NULL = the target):
-- one row per job, or the one refusal and nothing stored (rung_submit_group)
SELECT i, status, job_id, job, target, current FROM rung_submit_group($1::jsonb);
