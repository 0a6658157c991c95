-- $1 job id -> JOB (no row when missing); a queued job also carries its "placement"
-- (rung_job_json_placed: how many GPUs could take it now).
SELECT rung_job_json_placed(j) FROM jobs j WHERE j.id = $1::bigint;
