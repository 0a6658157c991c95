-- GET /metrics, what is true now (server/metrics.c reads it at every scrape): running attempts,
-- the queue, heartbeat lag, GPUs, workers, escalations and webhooks pending, as one JSON document. Each
-- count walks a partial index or a small table, so a scrape costs the same however long the
-- history is (the history's counts: metrics_history.sql). A job is running exactly while its
-- attempt is (one statement moves both), so running jobs are counted as running attempts, through
-- attempts_one_running, rather than by reading every job.
SELECT jsonb_build_object(
  'running', (SELECT count(*) FROM attempts WHERE state = 'running'),
  'queue_depth', (SELECT count(*) FROM jobs WHERE state = 'queued'),
  -- queued jobs whose floor no usable GPU on a live worker meets (requeue_bigger, started_bigger
  -- and a big host that left): exclusions aside, as rung_job_placement counts them; O(queue), the
  -- fleet's figure read once (a scalar subquery), not per job
  'unplaceable', (SELECT count(*) FROM jobs
                  WHERE state = 'queued' AND constraints ? 'min_gpu_memory_mib'
                    AND (constraints->>'min_gpu_memory_mib')::int > (SELECT rung_fleet_max_gpu_mib())),
  -- queued jobs whose owner runs as many jobs as its token's max_running allows (migration 020): the
  -- claim passes over them whatever the GPUs. Nothing is read without a limit; with limits, each
  -- limited owner's running attempts (O(running)) and the queue (O(queue)), as 'unplaceable' does.
  -- Unlike the claim (rung_owner_room) it takes no lock: a scrape may not hold up a lease.
  'owner_capped', CASE WHEN EXISTS (SELECT 1 FROM tokens t WHERE t.max_running IS NOT NULL) THEN
                    (SELECT count(*) FROM jobs j
                     WHERE j.state = 'queued'
                       AND j.owner IN (SELECT t.name FROM tokens t
                                       WHERE t.max_running IS NOT NULL
                                         AND t.max_running <= rung_owner_running(t.name)))
                  ELSE 0 END,
  'oldest_queued_s', (SELECT coalesce(extract(epoch FROM now() - min(updated_at))::float8, 0)
                      FROM jobs WHERE state = 'queued'),
  'heartbeat_lag_max_s', (SELECT coalesce(max(extract(epoch FROM now() - coalesce(last_heartbeat_at, started_at)))::float8, 0)
                          FROM attempts WHERE state = 'running'),
  'gpus', (SELECT coalesce(jsonb_object_agg(state, n), '{}')
           FROM (SELECT state, count(*) AS n FROM gpus GROUP BY state) s),
  'workers', (SELECT coalesce(jsonb_object_agg(state, n), '{}')
              FROM (SELECT state, count(*) AS n FROM workers GROUP BY state) s),
  'escalations', (SELECT coalesce(jsonb_object_agg(state, n), '{}')
                  FROM (SELECT state, count(*) AS n FROM escalations GROUP BY state) s),
  'webhook_pending', (SELECT count(*) FROM webhook_outbox WHERE delivered_at IS NULL))::text
