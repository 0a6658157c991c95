-- $1 job id -> {"attempts": [...]} oldest first; NULL when the job is missing
SELECT CASE WHEN EXISTS (SELECT 1 FROM jobs WHERE id = $1::bigint) THEN jsonb_build_object('attempts',
  coalesce((SELECT jsonb_agg(rung_attempt_json(a) ORDER BY a.number) FROM attempts a WHERE a.job_id = $1::bigint), '[]')) END;
