-- POST /v1/plan (server/api_plan.c): $1 arch, $2 the job's pool (migration 026) -> {"sizes": [{"gpu_mib",
-- "gpus", "draining_gpus"}] (the usable GPUs of that pool, a borrower's counted (migration 028), by memory size, largest first: not
-- quarantined, on a worker in the fleet; "gpus" those on live workers, "draining_gpus" those on drained
-- ones, as rung_job_placement counts them), "fleet_max_gpu_mib" (the pool's: rung_pool_max_gpu_mib),
-- "observations"}: the observations are the ones a lease's first-attempt check fits
-- (rung_memory_ctx_observations, as sql/memcache_fill.sql reads them), so the plan says what a lease
-- would do. O(GPUs) plus the arch's newest 48 observations.
SELECT jsonb_build_object(
  'sizes', coalesce((SELECT jsonb_agg(jsonb_build_object('gpu_mib', s.m, 'gpus', s.live, 'draining_gpus', s.drained)
                                      ORDER BY s.m DESC)
                     FROM (SELECT g.memory_total_mib AS m,
                                  count(*) FILTER (WHERE rung_worker_live(g.worker_id)) AS live,
                                  count(*) FILTER (WHERE NOT rung_worker_live(g.worker_id)) AS drained
                           FROM gpus g
                           WHERE g.state <> 'quarantined' AND rung_worker_in_fleet(g.worker_id)
                             AND (SELECT rung_worker_takes($2::text, w.pool, w.borrow) FROM workers w
                                  WHERE w.id = g.worker_id)
                           GROUP BY g.memory_total_mib) s), '[]'),
  'fleet_max_gpu_mib', rung_pool_max_gpu_mib($2::text),
  'observations', rung_memory_ctx_observations($1::text, 0, NULL))::text;
