-- The CTX of many finishing attempts (the recovery policy's input, docs/DESIGN.md) in one snapshot
-- and one set-wise query: p is [{"i", "id", "token", "facts", "plain"}]. Rows: (i, CTX) for each item
-- whose attempt is the running one with that token; a missing row means the fence failed. Configs
-- stored as NULL stay NULL (rungd resolves them, policy_ctx_resolve); the fleet's largest usable GPU
-- memory is computed once per batch (f is MATERIALIZED: inlined, its figure was computed again for
-- every item, round 24), and once per job (its pool's: rung_pool_max_gpu_mib) only while some worker
-- is outside the default pool (migration 026) or borrows (028); every row is found by primary key
-- (docs/PERFORMANCE.md).
-- "memory" is null for a plain finish (rungd: its FACTS classify as success or cancelled,
-- api_attempts_plain_finish) of an attempt that ran the job's target config (attempts.config NULL):
-- the policy ends such a job without a scale-up walk and reads no memory; reading the observations
-- was most of the CTX's cost (docs/PERFORMANCE.md, round 6). Any other finish carries it.
CREATE OR REPLACE FUNCTION rung_finish_ctx_batch(p jsonb) RETURNS TABLE (i int, ctx jsonb)
LANGUAGE sql STABLE AS $$
  WITH f AS MATERIALIZED (SELECT rung_fleet_max_gpu_mib() AS m, (EXISTS (SELECT 1 FROM workers w WHERE w.pool <> 'default')
                                                     OR EXISTS (SELECT 1 FROM workers w WHERE w.borrow <> '{}')) AS pooled),
  x AS (SELECT * FROM jsonb_to_recordset(p) AS x(i int, id bigint, token text, facts jsonb, plain boolean))
  SELECT x.i, jsonb_build_object(
    'job', jsonb_build_object('id', j.id, 'kind', j.kind, 'target_config', j.target_config,
                              'current_config', j.current_config, 'recovery', j.recovery,
                              'recovery_state', j.recovery_state, 'constraints', j.constraints,
                              'cancel_requested', j.cancel_requested),
    'attempts', coalesce((
      SELECT jsonb_agg(jsonb_build_object(
        'id', o.id, 'number', o.number, 'worker_id', o.worker_id, 'gpu_uuid', o.gpu_uuid,
        'gpu_memory_mib', (SELECT og.memory_total_mib FROM gpus og WHERE og.uuid = o.gpu_uuid),
        'config', o.config, 'state', o.state,
        'outcome', o.outcome, 'class', o.class, 'action', o.action, 'rung', o.rung,
        'facts', CASE WHEN o.facts IS NULL THEN NULL
                      ELSE o.facts || jsonb_build_object('log_tail', coalesce(o.log_tail, '[]')) END,
        'duration_ms', coalesce((o.facts->>'duration_ms')::bigint,
                                (extract(epoch FROM (coalesce(o.ended_at, now()) - o.started_at)) * 1000)::bigint))
        ORDER BY o.number)
      FROM attempts o
      WHERE o.job_id = j.id AND o.id <> a.id), '[]'),
    'attempt', jsonb_build_object(
      'id', a.id, 'number', a.number, 'worker_id', a.worker_id, 'gpu_uuid', a.gpu_uuid,
      'gpu_memory_mib', g.memory_total_mib, 'config', a.config, 'state', a.state,
      'outcome', NULL, 'class', NULL, 'action', NULL, 'rung', NULL, 'facts', x.facts,
      -- marked by rung_preempt (migration 029): a stop the worker reports as cancelled queues the job again
      'preempted', a.preempted_at IS NOT NULL, 'preempt_for', a.preempt_for,
      -- its worker's state: a re-queued job waits for an online worker's GPUs when its checkpoint is
      -- on that host (the checkpoint hold, recovery/resume.h), never for a draining one's
      'worker_state', (SELECT w.state FROM workers w WHERE w.id = a.worker_id),
      'duration_ms', coalesce((x.facts->>'duration_ms')::bigint,
                              (extract(epoch FROM (now() - a.started_at)) * 1000)::bigint)),
    'gpu', jsonb_build_object(
      'uuid', a.gpu_uuid, 'state', coalesce(g.state, 'ok'), 'memory_total_mib', g.memory_total_mib,
      'env_faults_in_window', (
        SELECT count(*) FROM gpu_faults gf
        WHERE gf.gpu_uuid = a.gpu_uuid
          AND gf.at > greatest(now() - make_interval(secs => coalesce((j.recovery->>'env_fault_window_s')::int, 3600)),
                               coalesce(g.released_at, '-infinity')))),
    'fleet', jsonb_build_object('max_gpu_memory_mib', CASE WHEN f.pooled THEN rung_pool_max_gpu_mib(j.pool) ELSE f.m END),
    -- guide 2D (a config at its limit) needs the success on a card no bigger than this one (within
    -- the ±10 % of a memory class): one that ran on 40 GiB says nothing of 24 GiB. Attempts from
    -- before migration 014 have no mem_gpu_mib and count, as they always did. A probe of
    -- attempts_succeeded_hash per item: as EXISTS the planner may hash the whole subquery instead,
    -- reading every succeeded attempt ever at each batch (round 6).
    'config_succeeded_before', coalesce((SELECT true FROM attempts s
                                         WHERE s.config_hash = a.config_hash AND s.outcome = 'succeeded'
                                           AND (s.mem_gpu_mib IS NULL OR g.memory_total_mib IS NULL
                                                OR s.mem_gpu_mib::bigint * 10 <= g.memory_total_mib::bigint * 11)
                                         LIMIT 1), false),
    'memory', CASE WHEN x.plain IS TRUE AND a.config IS NULL THEN NULL
                   ELSE jsonb_build_object('arch', rung_config_arch(j.target_config), 'gpu_mib', g.memory_total_mib,
                                           'observations', rung_memory_ctx_observations(rung_config_arch(j.target_config),
                                                                                        g.memory_total_mib, j.id)) END)
  -- one primary-key probe per item and per row it joins (OFFSET 0: planned alone; see the
  -- heartbeats)
  FROM x CROSS JOIN f
  CROSS JOIN LATERAL (SELECT * FROM attempts a
                      WHERE a.id = x.id AND a.token = x.token AND (a.state = 'running') IS TRUE OFFSET 0) a
  CROSS JOIN LATERAL (SELECT * FROM jobs j WHERE j.id = a.job_id OFFSET 0) j
  LEFT JOIN LATERAL (SELECT * FROM gpus g WHERE g.uuid = a.gpu_uuid OFFSET 0) g ON true
$$;
