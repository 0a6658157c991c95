-- Web job page. $1 job id, $2 owner or NULL -> {"job": JOB (with "placement" when queued:
-- rung_job_json_placed), "attempts": [ATTEMPT + gpu_memory_mib, gpu_name]
-- oldest first, "escalations": [ESCALATION], "log": {"number", "text"} or null: the last 16,384
-- characters (of at most 32 chunks) of what the running attempt's trainer printed so far}; no row when
-- missing or not the owner's.
SELECT jsonb_build_object('job', rung_job_json_placed(j),
  'attempts', coalesce((SELECT jsonb_agg(rung_attempt_json(a) || jsonb_build_object('gpu_memory_mib', g.memory_total_mib,
      'gpu_name', g.name) ORDER BY a.number)
    FROM attempts a LEFT JOIN gpus g ON g.uuid = a.gpu_uuid WHERE a.job_id = j.id), '[]'),
  'escalations', coalesce((SELECT jsonb_agg(rung_escalation_json(e, false) ORDER BY e.id)
    FROM escalations e WHERE e.job_id = j.id), '[]'),
  'log', (SELECT jsonb_build_object('number', r.number, 'text', coalesce((SELECT right(string_agg(c.body, ''
      ORDER BY c.byte_from), 16384) FROM (SELECT l.byte_from, l.body FROM attempt_logs l WHERE l.attempt_id = r.id
      ORDER BY l.byte_from DESC LIMIT 32) c), ''))
    FROM attempts r WHERE r.job_id = j.id AND r.state = 'running'))
FROM jobs j WHERE j.id = $1::bigint AND ($2::text IS NULL OR j.owner = $2::text);
