-- $1 job id -> JOB (no row when missing)
SELECT rung_job_json(j) FROM jobs j WHERE j.id = $1::bigint;
