-- $1 state or NULL, $2 cursor (last id seen) or NULL, $3 limit, $4 kind or NULL, $5 pool or NULL ->
-- {"jobs", "next_cursor"}. The kind and the pool are filters on the walk down the primary key (or jobs_state_id), not an index of its
-- own: with two kinds a page reads about limit / (the kind's share) rows, and a kind with few jobs
-- reads further back (retention bounds the table). Each JOB is built after the LIMIT, for the rows
-- shown only: a plan that reads more rows than it keeps (a bitmap scan and a sort, chosen when the
-- filters' estimate falls below the limit) would otherwise build one for each row it read.
WITH page AS (
  SELECT j.id FROM jobs j
  WHERE ($1::text IS NULL OR j.state = $1::text) AND ($2::bigint IS NULL OR j.id < $2::bigint)
    AND ($4::text IS NULL OR j.kind = $4::text)
    AND ($5::text IS NULL OR j.pool = $5::text)
  ORDER BY j.id DESC LIMIT $3::int + 1),
shown AS (SELECT id FROM page ORDER BY id DESC LIMIT $3::int)
SELECT jsonb_build_object(
  'jobs', coalesce((SELECT jsonb_agg(rung_job_json(j) ORDER BY j.id DESC) FROM jobs j WHERE j.id IN (SELECT id FROM shown)), '[]'),
  'next_cursor', CASE WHEN (SELECT count(*) FROM page) > $3::int THEN (SELECT min(id) FROM shown)::text END);
