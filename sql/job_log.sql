-- GET /v1/jobs/{id}/log (server/api_logs.c): $1 job id, $2 attempt number (NULL: the latest), $3 from
-- (0, or the `next` of the page before), $4 most bytes of text (a page holds at least one chunk) ->
-- {"job_id", "job_state", "attempts", "attempt": {"id", "number", "state", "outcome", "gpu_uuid",
-- "started_at", "ended_at"} or null (none yet, or no such number), "from", "next", "text", "more"}:
-- the chunks that start at or after `from`, oldest first, and whether more follow this page. NULL when
-- the job is missing.
WITH j AS (SELECT id, state, attempts_count FROM jobs WHERE id = $1::bigint),
a AS (SELECT a.id, a.number, a.state, a.outcome, a.gpu_uuid, a.started_at, a.ended_at FROM attempts a
      WHERE a.job_id = $1::bigint AND ($2::int IS NULL OR a.number = $2::int) ORDER BY a.number DESC LIMIT 1),
c AS (SELECT l.byte_from, l.byte_to, l.body,
             sum(octet_length(l.body)) OVER (ORDER BY l.byte_from) - octet_length(l.body) AS before
      FROM attempt_logs l, a WHERE l.attempt_id = a.id AND l.byte_from >= $3::bigint
      ORDER BY l.byte_from LIMIT 4096),
p AS (SELECT * FROM c WHERE c.before < $4::bigint),
n AS (SELECT coalesce(max(p.byte_to), $3::bigint) AS next FROM p)
SELECT jsonb_build_object('job_id', j.id, 'job_state', j.state, 'attempts', j.attempts_count,
  'attempt', (SELECT to_jsonb(a) FROM a),
  'from', $3::bigint,
  'next', n.next,
  'text', coalesce((SELECT string_agg(p.body, '' ORDER BY p.byte_from) FROM p), ''),
  'more', EXISTS (SELECT 1 FROM attempt_logs l, a WHERE l.attempt_id = a.id AND l.byte_from >= n.next))
FROM j, n;
