-- Web queue page. $1 state or NULL, $2 owner or NULL (a submitter sees only its own; staff may name
-- one), $3 limit, $4 kind or NULL, $5 cursor (the last id shown) or NULL, $6 labels (a JSON object
-- every job shown carries) or NULL, $7 pool or NULL (worker pools, migration 026)
-- -> {"jobs": [{id, name, state, kind, owner, pool, labels, priority, attempts, next_action, created_at, updated_at}] newest first,
--     "next_cursor": the last id shown when older jobs match, else null,
--     "counts": {STATE: n} over the owner, kind, label and pool filters (not the state's: they label its links)}
-- The page walks the primary key (or jobs_owner_id, jobs_state_id) as GET /v1/jobs does, the kind
-- and the labels filters on it (sql/job_list.sql; the API's label list has a statement of its own
-- that can take jobs_labels, sql/job_list_labelled.sql: a page of 50 a person asked for can walk).
WITH page AS (
  SELECT id, name, state, kind, owner, pool, labels, priority, attempts_count, next_action, created_at, updated_at FROM jobs
  WHERE ($1::text IS NULL OR state = $1::text) AND ($2::text IS NULL OR owner = $2::text)
    AND ($4::text IS NULL OR kind = $4::text) AND ($5::bigint IS NULL OR id < $5::bigint)
    AND ($6::jsonb IS NULL OR labels @> $6::jsonb) AND ($7::text IS NULL OR pool = $7::text)
  ORDER BY id DESC LIMIT $3::int + 1),
shown AS (SELECT * FROM page ORDER BY id DESC LIMIT $3::int)
SELECT jsonb_build_object(
  'jobs', coalesce((SELECT jsonb_agg(jsonb_build_object('id', j.id, 'name', j.name, 'state', j.state, 'kind', j.kind,
      'owner', j.owner, 'pool', j.pool, 'labels', j.labels, 'priority', j.priority, 'attempts', j.attempts_count, 'next_action', j.next_action,
      'created_at', j.created_at, 'updated_at', j.updated_at) ORDER BY j.id DESC) FROM shown j), '[]'),
  'next_cursor', CASE WHEN (SELECT count(*) FROM page) > $3::int THEN (SELECT min(id) FROM shown) END,
  'counts', coalesce((SELECT jsonb_object_agg(s.state, s.n)
    FROM (SELECT state, count(*) AS n FROM jobs WHERE ($2::text IS NULL OR owner = $2::text)
            AND ($4::text IS NULL OR kind = $4::text) AND ($6::jsonb IS NULL OR labels @> $6::jsonb)
            AND ($7::text IS NULL OR pool = $7::text)
          GROUP BY state) s), '{}'));
