-- Web queue page. $1 state or NULL, $2 owner or NULL (a submitter sees only its own), $3 limit
-- -> {"jobs": [{id, name, state, kind, owner, priority, attempts, next_action, created_at, updated_at}] newest first,
--     "counts": {STATE: n}}
SELECT jsonb_build_object(
  'jobs', coalesce((SELECT jsonb_agg(jsonb_build_object('id', j.id, 'name', j.name, 'state', j.state, 'kind', j.kind,
      'owner', j.owner, 'priority', j.priority, 'attempts', j.attempts_count, 'next_action', j.next_action,
      'created_at', j.created_at, 'updated_at', j.updated_at) ORDER BY j.id DESC)
    FROM (SELECT * FROM jobs WHERE ($1::text IS NULL OR state = $1::text) AND ($2::text IS NULL OR owner = $2::text)
          ORDER BY id DESC LIMIT $3::int) j), '[]'),
  'counts', coalesce((SELECT jsonb_object_agg(s.state, s.n)
    FROM (SELECT state, count(*) AS n FROM jobs WHERE $2::text IS NULL OR owner = $2::text GROUP BY state) s), '{}'));
