-- GET /metrics, the counts of the whole history: jobs that ended (succeeded, failed, cancelled: never a
-- queued, scheduled or running one), by state; ended attempts by
-- outcome and class, and their GPU seconds (also per owner); rungs applied; the lease-wait histogram (the view lease_waits). Each adds what
-- retention deleted (metrics_pruned), so the counters never fall. They read every job and attempt
-- (about 65 ms at 9,000 jobs and 6,600 attempts on 2 cores: docs/PERFORMANCE.md, round 10), so
-- rungd reads them at most once per --metrics-history-ms and answers the scrapes between from
-- that reading (server/metrics.c). One JSON document.
-- $1: the lease-wait histogram's upper bounds in seconds (float8[] text, ascending); each
-- bucket is cumulative (waits <= bound).
WITH waits AS MATERIALIZED (SELECT w FROM lease_waits),
pruned AS MATERIALIZED (SELECT kind, label1, label2, n FROM metrics_pruned)
SELECT jsonb_build_object(
  'jobs', (SELECT coalesce(jsonb_object_agg(state, n), '{}')
           FROM (SELECT state, sum(n) AS n
                 FROM (SELECT state, count(*)::float8 AS n FROM jobs WHERE state IN ('succeeded', 'failed', 'cancelled') GROUP BY state
                       UNION ALL SELECT label1, n FROM pruned WHERE kind = 'job') u GROUP BY state) s),
  'attempts', (SELECT coalesce(jsonb_agg(jsonb_build_object('outcome', outcome, 'class', class, 'n', n, 'gpu_s', gs)
                                         ORDER BY outcome, class), '[]')
               FROM (SELECT outcome, class, sum(n) AS n, sum(gs) AS gs
                     FROM (SELECT coalesce(outcome, state) AS outcome, coalesce(class, 'none') AS class, count(*)::float8 AS n,
                                  coalesce(sum(extract(epoch FROM ended_at - started_at)), 0)::float8 AS gs
                           FROM attempts WHERE state <> 'running' GROUP BY 1, 2
                           UNION ALL SELECT label1, label2, n, 0 FROM pruned WHERE kind = 'attempt'
                           UNION ALL SELECT label1, label2, 0, n FROM pruned WHERE kind = 'attempt_gpu_s') u
                     GROUP BY outcome, class) s),
  -- GPU seconds of ended attempts per owner and ending, in GET /v1/usage's words (sql/usage.sql):
  -- succeeded, oom (failed with a GPU OOM, a class oom_*; host_oom is among the failed), failed (any other failure), cancelled, lost
  'owner_gpu_s', (SELECT coalesce(jsonb_agg(jsonb_build_object('owner', owner, 'outcome', outcome, 's', gs)
                                            ORDER BY owner, outcome), '[]')
                  FROM (SELECT owner, outcome, sum(gs) AS gs
                        FROM (SELECT j.owner,
                                     CASE WHEN a.outcome = 'failed' AND left(a.class, 4) = 'oom_' THEN 'oom'
                                          ELSE coalesce(a.outcome, a.state) END AS outcome,
                                     coalesce(sum(extract(epoch FROM a.ended_at - a.started_at)), 0)::float8 AS gs
                              FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE a.state <> 'running' GROUP BY 1, 2
                              UNION ALL SELECT label1, label2, n FROM pruned WHERE kind = 'owner_gpu_s') u
                        GROUP BY owner, outcome) s),
  -- attempts that resumed from a checkpoint, the steps they did not run again (migration 031), and
  -- the GPU seconds that spared, estimated (migration 032)
  'resumed', (SELECT jsonb_build_object(
                'attempts', count(*) + coalesce((SELECT n FROM pruned WHERE kind = 'resumed' AND label1 = 'attempts'), 0),
                'steps', coalesce(sum(resumed_step), 0) + coalesce((SELECT n FROM pruned WHERE kind = 'resumed' AND label1 = 'steps'), 0),
                'gpu_s', coalesce(sum(resumed_gpu_s), 0)
                         + coalesce((SELECT n FROM pruned WHERE kind = 'resumed' AND label1 = 'gpu_s'), 0))
              FROM attempts WHERE resumed_step IS NOT NULL),
  'rungs', (SELECT coalesce(jsonb_object_agg(rung, n), '{}')
            FROM (SELECT rung, sum(n) AS n
                  FROM (SELECT rung, count(*)::float8 AS n FROM attempts WHERE rung IS NOT NULL GROUP BY rung
                        UNION ALL SELECT label1, n FROM pruned WHERE kind = 'rung') u GROUP BY rung) s),
  'lease_wait', (SELECT jsonb_build_object(
                   'buckets', (SELECT jsonb_agg((SELECT count(*) FROM waits WHERE w <= b) +
                                                coalesce((SELECT n FROM pruned WHERE kind = 'lease_wait_le'
                                                          AND label1 = b::text), 0) ORDER BY b)
                               FROM unnest($1::float8[]) AS b),
                   'sum', coalesce(sum(w), 0) + coalesce((SELECT n FROM pruned WHERE kind = 'lease_wait' AND label1 = 'sum'), 0),
                   'count', count(*) + coalesce((SELECT n FROM pruned WHERE kind = 'lease_wait' AND label1 = 'count'), 0))
                 FROM waits))::text
