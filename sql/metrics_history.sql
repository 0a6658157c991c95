-- GET /metrics, the counts of the whole history: jobs that ended, by state; ended attempts by
-- outcome and class; rungs applied; the lease-wait histogram. They read every job and attempt
-- (about 65 ms at 9,000 jobs and 6,600 attempts on 2 cores: docs/PERFORMANCE.md, round 10), so
-- rungd reads them at most once per --metrics-history-ms and answers the scrapes between from
-- that reading (server/metrics.c). One JSON document.
-- $1: the lease-wait histogram's upper bounds in seconds (float8[] text, ascending); each
-- bucket is cumulative (waits <= bound). A wait is a `leased` event's time minus the time of
-- the latest event before it that queued the job (submitted, re-queued, lease released): one pass
-- over the queueing and leased events in (job, id) order, rather than a lookup per leased event
-- (3.4x faster at 6,600 attempts).
WITH waits AS MATERIALIZED (
  SELECT extract(epoch FROM s.at - s.queued_at)::float8 AS w
  FROM (SELECT e.kind, e.at,
               max(e.at) FILTER (WHERE e.to_state = 'queued')
                 OVER (PARTITION BY e.job_id ORDER BY e.id ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS queued_at
        FROM events e WHERE e.to_state = 'queued' OR e.kind = 'leased') s
  WHERE s.kind = 'leased' AND s.queued_at IS NOT NULL)
SELECT jsonb_build_object(
  'jobs', (SELECT coalesce(jsonb_object_agg(state, n), '{}')
           FROM (SELECT state, count(*) AS n FROM jobs WHERE state NOT IN ('queued', 'running') GROUP BY state) s),
  'attempts', (SELECT coalesce(jsonb_agg(jsonb_build_object('outcome', outcome, 'class', class, 'n', n)
                                         ORDER BY outcome, class), '[]')
               FROM (SELECT coalesce(outcome, state) AS outcome, coalesce(class, 'none') AS class,
                            count(*) AS n
                     FROM attempts WHERE state <> 'running' GROUP BY 1, 2) s),
  'rungs', (SELECT coalesce(jsonb_object_agg(rung, n), '{}')
            FROM (SELECT rung, count(*) AS n FROM attempts WHERE rung IS NOT NULL GROUP BY rung) s),
  'lease_wait', (SELECT jsonb_build_object(
                   'buckets', (SELECT jsonb_agg((SELECT count(*) FROM waits WHERE w <= b) ORDER BY b)
                               FROM unnest($1::float8[]) AS b),
                   'sum', coalesce(sum(w), 0), 'count', count(*))
                 FROM waits))::text
