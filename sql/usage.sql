-- GET /v1/usage: GPU time per owner (a team's token) in the window [$1, $2) (epoch seconds), for
-- chargeback and for what OOMs cost. An attempt holds one GPU from its lease to its end (a running
-- one: to now); the part of that inside the window counts, split by how it ended: succeeded, oom
-- (failed with a GPU OOM, a class oom_*; host_oom is among the failed), failed (any other
-- failure), cancelled, lost (its worker vanished), preempted (stopped for a job of its worker's own
-- pool: migration 029), and running. $3: one owner, or NULL for all;
-- $4: labels (jsonb) the jobs carry, or NULL (a sweep's cost: `sweep=ID`). Jobs: those with GPU
-- time in the window, and those that ended in it, succeeded or failed. "resumed": the attempts that
-- ended in the window after resuming from a checkpoint (ended_at in (since, until], as `a` reads
-- them), the steps they did not run again, how many of them were priced, and the GPU seconds that
-- spared, estimated (attempts.resumed_gpu_s, migration 032). "by_gpu": the GPU seconds per GPU model
-- (gpus.name as its worker registered it; "unknown" for an attempt on no known GPU), per owner as an
-- object {model: seconds} and in the total as a list [{"model", "gpu_seconds", "oom_gpu_seconds"}], the
-- most first: for chargeback where an hour of one card costs more than another's, and for which cards
-- OOMs waste the most. "recovered": the jobs that succeeded in the window after at least one attempt of
-- theirs ran out of GPU memory (failed with a class oom_*), and those OOM attempts: the jobs rung brought
-- to a config that fit, which a relaunch unchanged would have lost again. Reads the attempts that
-- overlap the window (no index on their times: a report, not a hot path; retention bounds the
-- history). One JSON document.
WITH w AS (SELECT to_timestamp($1::float8) AS lo, to_timestamp($2::float8) AS hi),
a AS MATERIALIZED (
  SELECT j.owner, a.job_id,
         coalesce(nullif(g.name, ''), 'unknown') AS model,
         CASE WHEN a.state = 'running' THEN 'running'
              WHEN a.outcome = 'failed' AND left(a.class, 4) = 'oom_' THEN 'oom'
              ELSE coalesce(a.outcome, a.state) END AS bucket,
         extract(epoch FROM least(coalesce(a.ended_at, now()), w.hi) - greatest(a.started_at, w.lo))::float8 AS s
  FROM attempts a JOIN jobs j ON j.id = a.job_id LEFT JOIN gpus g ON g.uuid = a.gpu_uuid CROSS JOIN w
  WHERE a.started_at < w.hi AND coalesce(a.ended_at, now()) > w.lo
    AND ($3::text IS NULL OR j.owner = $3::text) AND ($4::jsonb IS NULL OR j.labels @> $4::jsonb)),
resumed AS MATERIALIZED (
  SELECT j.owner, count(*) AS attempts, sum(a.resumed_step) AS steps, count(a.resumed_gpu_s) AS priced,
         coalesce(sum(a.resumed_gpu_s), 0) AS gpu_s
  FROM attempts a JOIN jobs j ON j.id = a.job_id CROSS JOIN w
  WHERE a.resumed_step IS NOT NULL AND a.ended_at > w.lo AND a.ended_at <= w.hi
    AND ($3::text IS NULL OR j.owner = $3::text) AND ($4::jsonb IS NULL OR j.labels @> $4::jsonb)
  GROUP BY j.owner),
-- the jobs that succeeded in the window after an OOM, and their OOM attempts (by job: one probe of
-- attempts per job that ended in it)
recovered AS MATERIALIZED (
  SELECT j.owner, count(*) AS jobs, sum(o.n) AS oom_attempts
  FROM jobs j CROSS JOIN w
  CROSS JOIN LATERAL (SELECT count(*) AS n FROM attempts x
                      WHERE x.job_id = j.id AND x.outcome = 'failed' AND left(x.class, 4) = 'oom_') o
  WHERE j.state = 'succeeded' AND j.finished_at >= w.lo AND j.finished_at < w.hi AND o.n > 0
    AND ($3::text IS NULL OR j.owner = $3::text) AND ($4::jsonb IS NULL OR j.labels @> $4::jsonb)
  GROUP BY j.owner),
-- GPU seconds per owner and GPU model, summed once for the owners' rows and the total's list
models AS MATERIALIZED (SELECT x.owner, x.model, sum(x.s) AS s, coalesce(sum(x.s) FILTER (WHERE x.bucket = 'oom'), 0) AS oom
                        FROM a x GROUP BY x.owner, x.model),
ended AS MATERIALIZED (
  SELECT j.owner, j.state, count(*) AS n
  FROM jobs j CROSS JOIN w
  WHERE j.state IN ('succeeded', 'failed') AND j.finished_at >= w.lo AND j.finished_at < w.hi
    AND ($3::text IS NULL OR j.owner = $3::text) AND ($4::jsonb IS NULL OR j.labels @> $4::jsonb)
  GROUP BY j.owner, j.state),
per AS (
  SELECT o.owner,
         coalesce(sum(a.s), 0) AS gpu_seconds,
         count(a.job_id) AS attempts,
         count(DISTINCT a.job_id) AS jobs,
         jsonb_build_object(
           'succeeded', round(coalesce(sum(a.s) FILTER (WHERE a.bucket = 'succeeded'), 0)::numeric, 1),
           'oom', round(coalesce(sum(a.s) FILTER (WHERE a.bucket = 'oom'), 0)::numeric, 1),
           'failed', round(coalesce(sum(a.s) FILTER (WHERE a.bucket = 'failed'), 0)::numeric, 1),
           'cancelled', round(coalesce(sum(a.s) FILTER (WHERE a.bucket = 'cancelled'), 0)::numeric, 1),
           'lost', round(coalesce(sum(a.s) FILTER (WHERE a.bucket = 'lost'), 0)::numeric, 1),
           'preempted', round(coalesce(sum(a.s) FILTER (WHERE a.bucket = 'preempted'), 0)::numeric, 1),
           'running', round(coalesce(sum(a.s) FILTER (WHERE a.bucket = 'running'), 0)::numeric, 1)) AS by_outcome,
         coalesce((SELECT e.n FROM ended e WHERE e.owner = o.owner AND e.state = 'succeeded'), 0) AS jobs_succeeded,
         coalesce((SELECT e.n FROM ended e WHERE e.owner = o.owner AND e.state = 'failed'), 0) AS jobs_failed,
         coalesce((SELECT jsonb_build_object('attempts', r.attempts, 'steps', r.steps, 'priced', r.priced,
                                             'gpu_seconds', round(r.gpu_s::numeric, 1))
                   FROM resumed r WHERE r.owner = o.owner),
                  '{"attempts": 0, "steps": 0, "priced": 0, "gpu_seconds": 0}') AS resumed,
         coalesce((SELECT jsonb_build_object('jobs', r.jobs, 'oom_attempts', r.oom_attempts)
                   FROM recovered r WHERE r.owner = o.owner), '{"jobs": 0, "oom_attempts": 0}') AS recovered,
         coalesce((SELECT jsonb_object_agg(m.model, round(m.s::numeric, 1)) FROM models m WHERE m.owner = o.owner),
                  '{}') AS by_gpu
  FROM (SELECT owner FROM a UNION SELECT owner FROM ended) o
  LEFT JOIN a ON a.owner = o.owner
  GROUP BY o.owner)
SELECT jsonb_build_object(
  'since', (SELECT lo FROM w), 'until', (SELECT hi FROM w), 'owner', $3::text, 'labels', $4::jsonb,
  -- the GPU-hour quotas of the owners asked about (migration 035), whatever the window: a rolling
  -- window of their own (rung_owner_quota), each owner's quota over every pool first, then its quotas
  -- per pool (037: rung_owner_pool_quotas, with their "pool")
  'quotas', coalesce((SELECT jsonb_agg(q.doc ORDER BY q.owner, q.pool NULLS FIRST) FROM (
                        SELECT t.name AS owner, NULL::text AS pool, jsonb_build_object('owner', t.name) || rung_owner_quota(t.name) AS doc
                        FROM tokens t WHERE t.gpu_hours IS NOT NULL AND t.revoked_at IS NULL
                          AND ($3::text IS NULL OR t.name = $3::text)
                        UNION ALL
                        SELECT t.name, e->>'pool', jsonb_build_object('owner', t.name) || e
                        FROM tokens t CROSS JOIN LATERAL jsonb_array_elements(rung_owner_pool_quotas(t.name)) e
                        WHERE t.pool_gpu_hours IS NOT NULL AND t.revoked_at IS NULL
                          AND ($3::text IS NULL OR t.name = $3::text)) q), '[]'),
  'owners', coalesce((SELECT jsonb_agg(jsonb_build_object('owner', p.owner, 'gpu_seconds', round(p.gpu_seconds::numeric, 1),
                                                          'attempts', p.attempts, 'jobs', p.jobs,
                                                          'by_outcome', p.by_outcome,
                                                          'jobs_succeeded', p.jobs_succeeded, 'jobs_failed', p.jobs_failed,
                                                          'resumed', p.resumed, 'recovered', p.recovered, 'by_gpu', p.by_gpu)
                                       ORDER BY p.gpu_seconds DESC, p.owner)
                      FROM per p), '[]'),
  'total', (SELECT jsonb_build_object('gpu_seconds', round(coalesce(sum(a.s), 0)::numeric, 1), 'attempts', count(*),
                                      'jobs', count(DISTINCT a.job_id),
                                      'oom_gpu_seconds', round(coalesce(sum(a.s) FILTER (WHERE a.bucket = 'oom'), 0)::numeric, 1),
                                      'resumed', (SELECT jsonb_build_object(
                                                    'attempts', coalesce(sum(r.attempts), 0), 'steps', coalesce(sum(r.steps), 0),
                                                    'priced', coalesce(sum(r.priced), 0),
                                                    'gpu_seconds', round(coalesce(sum(r.gpu_s), 0)::numeric, 1))
                                                  FROM resumed r),
                                      'recovered', (SELECT jsonb_build_object('jobs', coalesce(sum(r.jobs), 0),
                                                                              'oom_attempts', coalesce(sum(r.oom_attempts), 0))
                                                    FROM recovered r),
                                      'by_gpu', coalesce((SELECT jsonb_agg(jsonb_build_object('model', m.model, 'gpu_seconds',
                                                                                                  round(m.s::numeric, 1),
                                                                                                  'oom_gpu_seconds',
                                                                                                  round(m.oom::numeric, 1))
                                                                             ORDER BY m.s DESC, m.model)
                                                          FROM (SELECT m.model, sum(m.s) AS s, sum(m.oom) AS oom
                                                                FROM models m GROUP BY m.model) m),
                                                         '[]'))
            FROM a))::text
