-- The CTX of a finish batch is built by one set-wise query over the batch (the finishing attempts
-- joined with their jobs and GPUs) instead of one function call, with its own query, per attempt
-- (~0.26 ms of Postgres per finish, docs/PERFORMANCE.md). Same CTX as 004's rung_finish_ctx_fleet
-- (configs stored as NULL stay NULL: rungd resolves them); the fleet's largest usable GPU memory is
-- computed once per batch. An item whose attempt is not the running one with that token gets no row.

CREATE OR REPLACE FUNCTION rung_finish_ctx_batch(p jsonb) RETURNS TABLE (i int, ctx jsonb)
LANGUAGE sql STABLE AS $$
  WITH f AS (SELECT coalesce((SELECT max(memory_total_mib) FROM gpus WHERE state <> 'quarantined'), 0) AS m),
  x AS (SELECT * FROM jsonb_to_recordset(p) AS x(i int, id bigint, token text, facts jsonb))
  SELECT x.i, jsonb_build_object(
    'job', jsonb_build_object('id', j.id, 'kind', j.kind, 'target_config', j.target_config,
                              'current_config', j.current_config, 'recovery', j.recovery,
                              'recovery_state', j.recovery_state, 'constraints', j.constraints,
                              'cancel_requested', j.cancel_requested),
    'attempts', coalesce((
      SELECT jsonb_agg(jsonb_build_object(
        'id', o.id, 'number', o.number, 'worker_id', o.worker_id, 'gpu_uuid', o.gpu_uuid,
        'gpu_memory_mib', og.memory_total_mib, 'config', o.config, 'state', o.state,
        'outcome', o.outcome, 'class', o.class, 'action', o.action, 'rung', o.rung,
        'facts', CASE WHEN o.facts IS NULL THEN NULL
                      ELSE o.facts || jsonb_build_object('log_tail', coalesce(o.log_tail, '[]')) END,
        'duration_ms', coalesce((o.facts->>'duration_ms')::bigint,
                                (extract(epoch FROM (coalesce(o.ended_at, now()) - o.started_at)) * 1000)::bigint))
        ORDER BY o.number)
      FROM attempts o LEFT JOIN gpus og ON og.uuid = o.gpu_uuid
      WHERE o.job_id = j.id AND o.id <> a.id), '[]'),
    'attempt', jsonb_build_object(
      'id', a.id, 'number', a.number, 'worker_id', a.worker_id, 'gpu_uuid', a.gpu_uuid,
      'gpu_memory_mib', g.memory_total_mib, 'config', a.config, 'state', a.state,
      'outcome', NULL, 'class', NULL, 'action', NULL, 'rung', NULL, 'facts', x.facts,
      'duration_ms', coalesce((x.facts->>'duration_ms')::bigint,
                              (extract(epoch FROM (now() - a.started_at)) * 1000)::bigint)),
    'gpu', jsonb_build_object(
      'uuid', a.gpu_uuid, 'state', coalesce(g.state, 'ok'), 'memory_total_mib', g.memory_total_mib,
      'env_faults_in_window', (
        SELECT count(*) FROM gpu_faults gf
        WHERE gf.gpu_uuid = a.gpu_uuid
          AND gf.at > greatest(now() - make_interval(secs => coalesce((j.recovery->>'env_fault_window_s')::int, 3600)),
                               coalesce(g.released_at, '-infinity')))),
    'fleet', jsonb_build_object('max_gpu_memory_mib', f.m),
    'config_succeeded_before', EXISTS (SELECT 1 FROM attempts s
                                       WHERE s.config_hash = a.config_hash AND s.outcome = 'succeeded'))
  FROM x CROSS JOIN f
  JOIN attempts a ON a.id = x.id AND a.token = x.token AND a.state = 'running'
  JOIN jobs j ON j.id = a.job_id
  LEFT JOIN gpus g ON g.uuid = a.gpu_uuid
$$;

-- The single-attempt CTX is the batch of one; 004's per-attempt function is gone.
CREATE OR REPLACE FUNCTION rung_finish_ctx(p_attempt bigint, p_token text, p_facts jsonb) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT ctx FROM rung_finish_ctx_batch(jsonb_build_array(jsonb_build_object(
    'i', 0, 'id', p_attempt, 'token', p_token, 'facts', p_facts)))
$$;
DROP FUNCTION rung_finish_ctx_fleet(bigint, text, jsonb, int);
