-- $1 job id -> JOB (no row when missing); a queued job also carries its "placement"
-- (rung_job_placement: how many GPUs could take it now).
SELECT rung_job_json(j) || CASE WHEN j.state = 'queued' THEN jsonb_build_object('placement', rung_job_placement(j))
                                ELSE '{}' END
FROM jobs j WHERE j.id = $1::bigint;
