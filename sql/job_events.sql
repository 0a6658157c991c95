-- $1 job id -> {"events": [...]} oldest first; NULL when the job is missing
SELECT CASE WHEN EXISTS (SELECT 1 FROM jobs WHERE id = $1::bigint) THEN jsonb_build_object('events',
  coalesce((SELECT jsonb_agg(jsonb_build_object('id', e.id, 'job_id', e.job_id, 'attempt_id', e.attempt_id,
     'kind', e.kind, 'from_state', e.from_state, 'to_state', e.to_state, 'reason', e.reason, 'data', e.data,
     'at', e.at) ORDER BY e.id) FROM events e WHERE e.job_id = $1::bigint), '[]')) END;
