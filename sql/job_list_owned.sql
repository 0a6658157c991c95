-- job_list.sql for one owner (a submitter's own jobs, or the owner staff named): $1 state or NULL,
-- $2 cursor or NULL, $3 limit, $4 kind or NULL, $5 owner, $6 pool or NULL -> {"jobs",
-- "next_cursor"}. Walks jobs_owner_id (owner, id); the kind and the pool are filters on it, and each JOB is built after the LIMIT, as
-- in job_list.sql (an owner whose jobs are mostly of one kind is estimated at a few rows of it,
-- and read whole by a bitmap scan).
WITH page AS (
  SELECT j.id FROM jobs j
  WHERE j.owner = $5 AND ($1::text IS NULL OR j.state = $1::text) AND ($2::bigint IS NULL OR j.id < $2::bigint)
    AND ($4::text IS NULL OR j.kind = $4::text)
    AND ($6::text IS NULL OR j.pool = $6::text)
  ORDER BY j.id DESC LIMIT $3::int + 1),
shown AS (SELECT id FROM page ORDER BY id DESC LIMIT $3::int)
SELECT jsonb_build_object(
  'jobs', coalesce((SELECT jsonb_agg(rung_job_json(j) ORDER BY j.id DESC) FROM jobs j WHERE j.id IN (SELECT id FROM shown)), '[]'),
  'next_cursor', CASE WHEN (SELECT count(*) FROM page) > $3::int THEN (SELECT min(id) FROM shown)::text END);
