-- GET /v1/pools (rungctl pools) -> {"pools": [POOL]}: every worker pool in use, by name: the pools of
-- the workers in the fleet (rung_worker_in_fleet: live or drained), the pools they borrow from
-- (migration 028) and the pools of the jobs not finished. Per pool: "queued", "scheduled" and
-- "running" jobs; "workers" in the fleet whose pool it is, "gpus" not quarantined on its live workers
-- (as rung_pool_gpus counts them), "draining_gpus" on its drained ones, "borrowing_gpus" on live
-- workers of other pools that borrow from it (rung_pool_borrowing_gpus), "borrowed_by" the pools of
-- those workers, "borrows" the pools its own workers borrow from, and "max_gpu_mib", its largest usable
-- GPU (rung_pool_max_gpu_mib: a borrower's counted; 0: none). O(workers, GPUs, unfinished jobs): for
-- an operator's page, not a hot path.
WITH jobs_by_pool AS (SELECT j.pool, count(*) FILTER (WHERE j.state = 'queued') AS queued,
                             count(*) FILTER (WHERE j.state = 'scheduled') AS scheduled,
                             count(*) FILTER (WHERE j.state = 'running') AS running
                      FROM jobs j WHERE j.state IN ('queued', 'scheduled', 'running') GROUP BY j.pool),
  fleet AS MATERIALIZED (SELECT w.id, w.pool, w.borrow, rung_worker_live(w.id) AS live FROM workers w
                         WHERE rung_worker_in_fleet(w.id)),
  gpus_by_pool AS (SELECT f.pool, count(DISTINCT f.id) AS workers,
                          count(g.uuid) FILTER (WHERE f.live AND g.state <> 'quarantined') AS gpus,
                          count(g.uuid) FILTER (WHERE NOT f.live AND g.state <> 'quarantined') AS draining
                   FROM fleet f LEFT JOIN gpus g ON g.worker_id = f.id GROUP BY f.pool),
  lent AS (SELECT b.pool, count(g.uuid) FILTER (WHERE f.live AND g.state <> 'quarantined') AS gpus,
                  jsonb_agg(DISTINCT f.pool) AS by_pools
           FROM fleet f CROSS JOIN LATERAL unnest(f.borrow) AS b(pool) LEFT JOIN gpus g ON g.worker_id = f.id
           WHERE b.pool <> f.pool GROUP BY b.pool),
  borrows AS (SELECT f.pool, jsonb_agg(DISTINCT b.pool) AS pools
              FROM fleet f CROSS JOIN LATERAL unnest(f.borrow) AS b(pool) GROUP BY f.pool),
  names AS (SELECT pool FROM jobs_by_pool UNION SELECT pool FROM fleet UNION SELECT pool FROM lent)
SELECT jsonb_build_object('pools', coalesce(jsonb_agg(jsonb_build_object(
         'pool', n.pool, 'queued', coalesce(j.queued, 0), 'scheduled', coalesce(j.scheduled, 0),
         'running', coalesce(j.running, 0), 'workers', coalesce(g.workers, 0), 'gpus', coalesce(g.gpus, 0),
         'draining_gpus', coalesce(g.draining, 0), 'borrowing_gpus', coalesce(l.gpus, 0),
         'borrowed_by', coalesce(l.by_pools, '[]'), 'borrows', coalesce(b.pools, '[]'),
         'max_gpu_mib', rung_pool_max_gpu_mib(n.pool)) ORDER BY n.pool), '[]'))
FROM names n LEFT JOIN jobs_by_pool j ON j.pool = n.pool LEFT JOIN gpus_by_pool g ON g.pool = n.pool
     LEFT JOIN lent l ON l.pool = n.pool LEFT JOIN borrows b ON b.pool = n.pool;
