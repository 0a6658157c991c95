-- GET /metrics, what is true now (server/metrics.c reads it at every scrape): running attempts,
-- the queue (and per worker pool), the scheduled jobs, heartbeat lag, GPUs, workers, the tokens that
-- expire, escalations and webhooks pending, as
-- one JSON document. Each count walks a partial index or a small table, so a scrape costs the same
-- however long the history is (the history's counts: metrics_history.sql). A job is running exactly while its
-- attempt is (one statement moves both), so running jobs are counted as running attempts, through
-- attempts_one_running, rather than by reading every job.
-- The queue is read once for its depth, its owners and those at their limit, and its pools
-- (queued: O(queue); owners: rung_owners_summary, O(running)).
WITH queued AS MATERIALIZED (SELECT c.owner, c.pool, count(*) AS n FROM jobs c WHERE c.state = 'queued'
                             GROUP BY c.owner, c.pool)
  , queued_by_owner AS (SELECT q.owner, sum(q.n)::bigint AS n FROM queued q GROUP BY q.owner)
  , queued_by_pool AS (SELECT q.pool, sum(q.n)::bigint AS n FROM queued q GROUP BY q.pool)
  -- the GPUs a job of each pool may run on: not quarantined, on a live worker (rung_worker_live:
  -- online and seen in the last 10 minutes; a drained worker takes no lease), O(GPUs)
  , gpus_by_pool AS (SELECT w.pool, count(*) AS n FROM gpus g JOIN workers w ON w.id = g.worker_id
                     WHERE g.state <> 'quarantined' AND rung_worker_live(w.id) GROUP BY w.pool)
  -- the GPUs that workers of other pools lend each pool (migration 028: a worker takes the jobs of the
  -- pools it borrows from when its own has none for it), counted as gpus_by_pool counts, O(GPUs)
  , borrowing_by_pool AS (SELECT b.pool, count(*) AS n
                          FROM gpus g JOIN workers w ON w.id = g.worker_id CROSS JOIN LATERAL unnest(w.borrow) AS b(pool)
                          WHERE g.state <> 'quarantined' AND rung_worker_live(w.id) AND b.pool <> w.pool
                          GROUP BY b.pool)
  -- the largest usable GPU of each pool with queued jobs (rung_pool_max_gpu_mib: in the fleet, as the
  -- placement's fleet_max_gpu_mib), read once per pool
  , pool_max AS MATERIALIZED (SELECT q.pool, rung_pool_max_gpu_mib(q.pool) AS mib FROM queued_by_pool q)
  , owners AS MATERIALIZED (SELECT rung_owners_summary(coalesce(jsonb_object_agg(q.owner, q.n), '{}')) AS s
                           FROM queued_by_owner q)
SELECT jsonb_build_object(
  'running', (SELECT count(*) FROM attempts WHERE state = 'running'),
  'queue_depth', (SELECT coalesce(sum(q.n), 0) FROM queued_by_owner q),
  -- queued jobs that no usable GPU of their pool may take: none not quarantined, on a worker of
  -- its pool or one that borrows from it (migration 028) in the fleet (rung_worker_in_fleet: live or
  -- drained; rung_pool_max_gpu_mib counts the borrowers too), meets the job's floor and is left
  -- by its exclusions, as rung_job_placement counts them (its gpus + draining_gpus = 0): a floor above
  -- its pool's largest GPU (requeue_bigger, started_bigger, a big host that left), exclusions that
  -- leave no GPU at its floor (environment faults on every GPU it may use), or no usable GPU in its
  -- pool at all (then every queued job of the pool, as the placement says). A job without
  -- exclusions weighs its floor against its pool's figure, read once per pool; one with exclusions probes
  -- gpus_usable_memory down from its floor to the first GPU it may take (rung_job_allows):
  -- one pass over the queue plus a short probe per job that excluded something (100,000 queued jobs
  -- with a floor: 46 ms for this count, 30 for the floor alone, 225 with a probe for every job)
  'unplaceable', (SELECT count(*) FROM jobs j JOIN pool_max m ON m.pool = j.pool
                  WHERE j.state = 'queued'
                    AND CASE WHEN m.mib = 0 THEN true -- no usable GPU in its pool at all
                             WHEN j.constraints = '{}' THEN false
                             WHEN j.constraints ?| '{exclude_gpus,exclude_workers}' THEN
                          NOT EXISTS (SELECT 1 FROM gpus g
                                      WHERE g.state <> 'quarantined'
                                        AND g.memory_total_mib >= coalesce((j.constraints->>'min_gpu_memory_mib')::int, 0)
                                        -- (not the checkpoint hold: it ends; rung_job_placement does not weigh it either)
                                        AND rung_job_allows(j.constraints - 'hold', g.worker_id, g.uuid, g.memory_total_mib)
                                        AND rung_worker_in_fleet(g.worker_id)
                                        AND (SELECT rung_worker_takes(j.pool, w.pool, w.borrow)
                                             FROM workers w WHERE w.id = g.worker_id))
                        ELSE coalesce((j.constraints->>'min_gpu_memory_mib')::int, 0) > m.mib
                        END),
  -- queued jobs whose owner runs as many jobs as its token's max_running allows (migration 020), or as
  -- many of their pool's as its limit there allows (migration 034), or is over its GPU-hour quota
  -- (migration 035) or its quota in their pool (037): the claim passes over them
  -- whatever the GPUs. From the per-owner counts below and the queue's (owner, pool) counts, not a
  -- read of its own. Unlike the claim (rung_owner_room) it takes no lock: a scrape may not hold up a
  -- lease.
  'owner_capped', (SELECT coalesce(sum(q.n), 0)::bigint FROM queued q
                   WHERE EXISTS (SELECT 1 FROM owners o, jsonb_array_elements(o.s) e
                                 WHERE e->>'owner' = q.owner
                                   AND ((jsonb_typeof(e->'max_running') = 'number'
                                         AND (e->>'running')::int >= (e->>'max_running')::int)
                                        OR coalesce((e->'quota'->>'over')::boolean, false)
                                        OR EXISTS (SELECT 1 FROM jsonb_array_elements(e->'pool_limits') l
                                                   WHERE l->>'pool' = q.pool
                                                     AND (l->>'running')::int >= (l->>'max_running')::int)
                                        OR EXISTS (SELECT 1 FROM jsonb_array_elements(e->'pool_quotas') pq
                                                   WHERE pq->>'pool' = q.pool AND (pq->>'over')::boolean)))),
  -- per owner (rung_owners_summary, from queued_by_owner): as many series as owners with jobs
  -- waiting or running and live tokens with a limit, at most one per token
  'owners', (SELECT o.s FROM owners o),
  -- per worker pool (migration 026), {POOL: {"queued", "gpus", "borrowing_gpus"}}: every pool with
  -- queued jobs, live GPUs or borrowers' GPUs, so that a pool whose jobs have no GPU at all is listed
  -- with "gpus" and "borrowing_gpus" 0 (RungPoolWithoutGpus)
  'pools', (SELECT coalesce(jsonb_object_agg(p.pool, jsonb_build_object('queued', coalesce(q.n, 0),
                                                                       'gpus', coalesce(g.n, 0),
                                                                       'borrowing_gpus', coalesce(l.n, 0))), '{}')
            FROM (SELECT pool FROM queued_by_pool UNION SELECT pool FROM gpus_by_pool
                  UNION SELECT pool FROM borrowing_by_pool) p
                 LEFT JOIN queued_by_pool q ON q.pool = p.pool LEFT JOIN gpus_by_pool g ON g.pool = p.pool
                 LEFT JOIN borrowing_by_pool l ON l.pool = p.pool),
  -- jobs waiting for their start time (migration 025), and how late the most overdue of them is:
  -- the scheduler queues a job within about a second of its run_after, so a figure that grows says
  -- no rungd runs it (both walk jobs_scheduled: O(scheduled) and one entry); a job that still waits
  -- for other jobs to succeed (migration 033) is not late, whatever its start time says
  'scheduled', (SELECT count(*) FROM jobs WHERE state = 'scheduled'),
  'scheduled_overdue_s', (SELECT coalesce(greatest(extract(epoch FROM now() - min(run_after))::float8, 0), 0)
                          FROM jobs WHERE state = 'scheduled' AND waits_for IS NULL),
  'oldest_queued_s', (SELECT coalesce(extract(epoch FROM now() - min(updated_at))::float8, 0)
                      FROM jobs WHERE state = 'queued'),
  'heartbeat_lag_max_s', (SELECT coalesce(max(extract(epoch FROM now() - coalesce(last_heartbeat_at, started_at)))::float8, 0)
                          FROM attempts WHERE state = 'running'),
  'gpus', (SELECT coalesce(jsonb_object_agg(state, n), '{}')
           FROM (SELECT state, count(*) AS n FROM gpus GROUP BY state) s),
  'workers', (SELECT coalesce(jsonb_object_agg(state, n), '{}')
              FROM (SELECT state, count(*) AS n FROM workers GROUP BY state) s),
  -- the live workers per version they registered with (migration 024; 'unknown': none sent), to
  -- follow a rollout: as many series as builds in the fleet. Live as the fleet's figures count them
  -- (rung_worker_in_fleet: online or draining, and seen in the last 10 minutes), so a host gone for
  -- good, whose row stays 'online', stops holding its old version up after 10 minutes.
  'workers_by_version', (SELECT coalesce(jsonb_object_agg(v, n), '{}')
                         FROM (SELECT coalesce(version, 'unknown') AS v, count(*) AS n FROM workers w
                               WHERE rung_worker_in_fleet(w.id) GROUP BY 1) s),
  -- the tokens that expire (migration 023), live or expired in the last day, [{"id", "name", "role",
  -- "s": seconds until it expires, negative once it has}], soonest first: what to rotate before it
  -- stops a team's submits or a fleet's workers (RungTokenExpiringSoon). The day after: so that the
  -- alert does not end at the moment the token stops working. Small (tokens: one per team or host).
  'token_expiry', (SELECT coalesce(jsonb_agg(jsonb_build_object('id', t.id, 'name', t.name, 'role', t.role,
                                                                's', floor(extract(epoch FROM t.expires_at - now())))
                                             ORDER BY t.expires_at, t.id), '[]')
                   FROM tokens t
                   WHERE t.revoked_at IS NULL AND t.expires_at IS NOT NULL AND t.expires_at > now() - interval '1 day'),
  'escalations', (SELECT coalesce(jsonb_object_agg(state, n), '{}')
                  FROM (SELECT state, count(*) AS n FROM escalations GROUP BY state) s),
  'webhook_pending', (SELECT count(*) FROM webhook_outbox WHERE delivered_at IS NULL))::text
