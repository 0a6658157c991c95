-- The memory model's data (issue 12): what each ended attempt tells about memory, and the reset
-- times of what rung learned per (arch, GPU memory class). rungd computes an attempt's FEATURES and
-- OBSERVATION in C (recovery/memmodel.c) when it ends and stores them with the finish; the CTX and
-- GET /v1/profiles read them back through rung_memory_observations.

ALTER TABLE attempts
  ADD COLUMN peak_mib     int,    -- FACTS.peak.mib: the highest memory.used while the trainer ran
  ADD COLUMN peak_phase   text,   -- FACTS.peak.phase
  ADD COLUMN mem_features jsonb,  -- memmodel_features of the attempt's config
  ADD COLUMN mem_arch     text,   -- memmodel_arch of the config
  ADD COLUMN mem_gpu_mib  int,    -- total memory of the attempt's GPU
  ADD COLUMN mem_obs      jsonb;  -- the OBSERVATION, only when it fit or ran out of GPU memory
-- The observations of one arch, newest first (the CTX and the profiles read at most 200).
CREATE INDEX attempts_mem_obs ON attempts (mem_arch, id DESC) WHERE mem_obs IS NOT NULL;

-- One row per (arch, GPU class) that support reset: observations that ended before reset_at no
-- longer count. gpu_class_mib is memmodel_gpu_class: total MiB rounded to the nearest GiB.
CREATE TABLE memory_profiles (
  arch          text NOT NULL,
  gpu_class_mib int NOT NULL CHECK (gpu_class_mib > 0),
  reset_at      timestamptz NOT NULL DEFAULT now(),
  reset_by      text,
  PRIMARY KEY (arch, gpu_class_mib)
);

-- memmodel_arch in SQL (the CTX must pick the arch before rungd has the config): model.arch of the
-- first process without a ":tag" suffix, else the legacy flags is_flux / is_xl / is_v3, else
-- "unknown". it_memory checks the two agree.
CREATE FUNCTION rung_config_arch(c jsonb) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT split_part(CASE WHEN jsonb_typeof(m->'arch') = 'string' AND m->>'arch' <> '' THEN m->>'arch'
                         WHEN jsonb_typeof(m->'arch') = 'string' THEN 'unknown'
                         WHEN m->'is_flux' = 'true'::jsonb THEN 'flux'
                         WHEN m->'is_xl' = 'true'::jsonb THEN 'sdxl'
                         WHEN m->'is_v3' = 'true'::jsonb THEN 'sd3'
                         ELSE 'unknown' END, ':', 1)
  FROM (SELECT c #> '{config,process,0,model}' AS m) s
$$;

-- The OBSERVATIONs of ARCH on GPUs of the same memory class as GPU_MIB (total within ±10 %), newest
-- first, at most 200, plus every one of job P_JOB (NULL: none); only those that ended after the
-- reset of (ARCH, class of GPU_MIB). Each carries "at" (when it ended). [] when GPU_MIB is NULL.
CREATE FUNCTION rung_memory_observations(p_arch text, p_gpu_mib int, p_job bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  WITH r AS (SELECT coalesce((SELECT m.reset_at FROM memory_profiles m
                              WHERE m.arch = p_arch AND m.gpu_class_mib = ((p_gpu_mib + 512) / 1024) * 1024),
                             '-infinity') AS t),
  o AS ((SELECT a.id, a.mem_obs, a.ended_at FROM attempts a, r
         WHERE a.mem_arch = p_arch AND a.mem_obs IS NOT NULL AND a.ended_at > r.t
           AND abs(a.mem_gpu_mib::bigint - p_gpu_mib) * 100 <= p_gpu_mib::bigint * 10
         ORDER BY a.mem_arch, a.id DESC LIMIT 200)
        UNION
        SELECT a.id, a.mem_obs, a.ended_at FROM attempts a, r
        WHERE a.job_id = p_job AND a.mem_obs IS NOT NULL AND a.ended_at > r.t)
  SELECT coalesce(jsonb_agg(o.mem_obs || jsonb_build_object('at', o.ended_at) ORDER BY o.id DESC), '[]')
  FROM o WHERE p_gpu_mib IS NOT NULL
$$;

-- The finish path stores the memory data: rung_finish_apply_batch takes each item's "obs" (the
-- OBSERVATION rungd built, with the FEATURES) and FACTS.peak; rung_finish_ctx_batch adds the CTX's
-- "memory". Only those lines differ from migrations/011_index_paths.sql.
CREATE OR REPLACE FUNCTION rung_finish_apply_batch(p jsonb) RETURNS TABLE (i int, doc jsonb)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  e jsonb;
BEGIN
  -- (jsonpath tests scan p in place: no element of it is copied)
  -- NOTIFY is sent at commit: one for the batch when a plain decision re-queues (a cancel may turn
  -- it into none: a spare wake-up finds nothing to claim)
  IF p @? '$[*] ? (@.decision.job_state == "queued" && !(@.decision.gpu.type() == "object")
                   && !(@.decision.escalation.type() == "object") && !(@.decision.class == "env_fault"))' THEN
    PERFORM pg_notify('rung_jobs', '');
  END IF;
  IF p @? '$[*] ? (!(@.decision.gpu.type() == "object") && !(@.decision.escalation.type() == "object")
                   && !(@.decision.class == "env_fault"))' THEN
    RETURN QUERY
    WITH x AS MATERIALIZED (
      SELECT * FROM jsonb_to_recordset(p) AS x(i int, id bigint, token text, facts jsonb, decision jsonb, obs jsonb)
      WHERE jsonb_typeof(x.decision->'gpu') IS DISTINCT FROM 'object'
        AND jsonb_typeof(x.decision->'escalation') IS DISTINCT FROM 'object'
        AND x.decision->>'class' IS DISTINCT FROM 'env_fault'),
    la AS MATERIALIZED (
      -- one primary-key probe per item, fenced, then locked in array (attempt id) order; see the
      -- heartbeats. It keeps the item (i) that passed the fence: a stale item may name the same id.
      SELECT t.id, x.i FROM x CROSS JOIN LATERAL (SELECT t.id FROM attempts t
                                             WHERE t.id = x.id AND t.token = x.token
                                               AND (t.state = 'running') IS TRUE
                                             OFFSET 0 FOR UPDATE) t),
    a AS (
      UPDATE attempts t SET state = 'ended',
        outcome = CASE x.decision->>'class' WHEN 'success' THEN 'succeeded' WHEN 'cancelled' THEN 'cancelled'
                                            ELSE 'failed' END,
        ended_at = now(), class = x.decision->>'class', rule = x.decision->>'rule',
        evidence = x.decision->'evidence', action = x.decision->>'action', rung = x.decision->>'rung',
        changes = x.decision->'changes', facts = x.facts - 'log_tail',
        log_tail = coalesce(x.facts->'log_tail', '[]'),
        phase = coalesce(x.facts->>'phase', t.phase),
        step = coalesce((x.facts->>'last_step')::int, t.step),
        total_steps = coalesce((x.facts->>'total_steps')::int, t.total_steps),
        -- the memory model's data (014): peak from FACTS.peak, the OBSERVATION rungd built
        peak_mib = least((x.facts->'peak'->>'mib')::bigint, 2147483647)::int, peak_phase = x.facts->'peak'->>'phase',
        mem_features = x.obs->'features', mem_arch = x.obs->>'arch', mem_gpu_mib = (x.obs->>'gpu_mib')::int,
        mem_obs = CASE WHEN x.obs->>'outcome' IN ('fit', 'oom') THEN x.obs END
      FROM x JOIN la ON la.i = x.i
      WHERE t.id = la.id AND t.id = ANY (ARRAY(SELECT la.id FROM la))
      RETURNING x.i, t.id, t.job_id, t.number, t.outcome, t.config, x.decision),
    lj AS MATERIALIZED (
      SELECT jb.id, jb.state, jb.cancel_requested FROM jobs jb
      WHERE jb.id = ANY (ARRAY(SELECT a.job_id FROM a)) ORDER BY jb.id FOR UPDATE OF jb),
    d AS MATERIALIZED (
      SELECT a.*, lj.state AS old_state, dd, coalesce(dd->>'job_state', 'failed') AS new_state
      FROM a JOIN lj ON lj.id = a.job_id,
      LATERAL (SELECT CASE WHEN lj.cancel_requested AND coalesce(a.decision->>'job_state', 'failed') = 'queued'
                           THEN a.decision || jsonb_build_object('job_state', 'cancelled', 'next_config', NULL,
                                                                 'reason', 'cancelled: ' || coalesce(a.decision->>'reason', ''))
                           ELSE a.decision END AS dd) c),
    uj AS (
      UPDATE jobs SET
        state = d.new_state,
        current_config = CASE WHEN jsonb_typeof(d.dd->'next_config') = 'object'
                              THEN rung_config_or_null(d.dd->'next_config', jobs.target_config)
                              ELSE jobs.current_config END,
        constraints = CASE WHEN jsonb_typeof(d.dd->'constraints') = 'object'
                           THEN rung_merge_constraints(jobs.constraints, d.dd->'constraints') ELSE jobs.constraints END,
        recovery_state = CASE WHEN jsonb_typeof(d.dd->'recovery_state') = 'object' THEN d.dd->'recovery_state'
                              ELSE jobs.recovery_state END,
        result = CASE WHEN d.new_state = 'queued' THEN jobs.result
                      ELSE jsonb_build_object('attempt_id', d.id, 'class', d.dd->>'class', 'rule', d.dd->>'rule',
                                              'reason', d.dd->>'reason')
                           || CASE WHEN d.new_state = 'succeeded' AND d.config IS NULL THEN '{}'::jsonb
                                   ELSE jsonb_build_object('config', CASE WHEN d.new_state = 'succeeded' THEN d.config END) END
                           || CASE WHEN jsonb_typeof(d.dd->'result') = 'object' THEN d.dd->'result' ELSE '{}' END END,
        finished_at = CASE WHEN d.new_state = 'queued' THEN NULL ELSE now() END,
        next_action = CASE WHEN coalesce(d.dd->'recovery_state'->>'next_action', '') <> ''
                             THEN d.dd->'recovery_state'->>'next_action'
                           WHEN d.new_state = 'queued' THEN d.dd->>'reason' ELSE NULL END,
        updated_at = now()
      FROM d WHERE jobs.id = d.job_id AND jobs.id = ANY (ARRAY(SELECT d.job_id FROM d))),
    ev AS (
      INSERT INTO events (job_id, attempt_id, kind, from_state, to_state, reason, data)
      SELECT d.job_id, d.id, v.kind, v.from_state, v.to_state, d.dd->>'reason', v.data
      FROM d CROSS JOIN LATERAL (VALUES
        (1, 'attempt_ended', 'running', d.outcome,
         jsonb_build_object('number', d.number, 'class', d.dd->>'class', 'rule', d.dd->>'rule',
                            'evidence', d.dd->'evidence', 'action', d.dd->>'action', 'rung', d.dd->>'rung',
                            'changes', d.dd->'changes')),
        (2, 'job_' || d.new_state, d.old_state, d.new_state, NULL)) AS v(ord, kind, from_state, to_state, data)
      ORDER BY d.id, v.ord)
    -- a decision whose job_state is not a job state fails the jobs CHECK, as rung_finish_apply's
    -- RAISE does: the statement fails and rungd applies the items one at a time
    SELECT d.i, jsonb_build_object('attempt_id', d.id, 'job_id', d.job_id, 'job_state', d.new_state,
                                   'escalation_id', NULL, 'decision', d.dd)
    FROM d;
  END IF;

  IF NOT p @? '$[*] ? (@.decision.gpu.type() == "object" || @.decision.escalation.type() == "object"
                       || @.decision.class == "env_fault")' THEN
    RETURN;
  END IF;
  FOR e IN SELECT x FROM jsonb_array_elements(p) x
           WHERE jsonb_typeof(x->'decision'->'gpu') = 'object'
              OR jsonb_typeof(x->'decision'->'escalation') = 'object'
              OR x->'decision'->>'class' = 'env_fault'
           ORDER BY (x->>'id')::bigint LOOP
    i := (e->>'i')::int;
    doc := rung_finish_apply((e->>'id')::bigint, e->>'token', e->'facts', e->'decision',
                             CASE WHEN jsonb_typeof(e->'report') = 'object' THEN e->'report' END);
    IF doc IS NOT NULL AND (jsonb_typeof(e->'obs') = 'object' OR jsonb_typeof(e->'facts'->'peak') = 'object') THEN
      -- the memory model's data (014), on this rare path (escalations, GPU marks) a second write
      UPDATE attempts SET
        peak_mib = least((e->'facts'->'peak'->>'mib')::bigint, 2147483647)::int, peak_phase = e->'facts'->'peak'->>'phase',
        mem_features = e->'obs'->'features', mem_arch = e->'obs'->>'arch', mem_gpu_mib = (e->'obs'->>'gpu_mib')::int,
        mem_obs = CASE WHEN e->'obs'->>'outcome' IN ('fit', 'oom') THEN e->'obs' END
      WHERE id = (e->>'id')::bigint;
    END IF;
    RETURN NEXT;
  END LOOP;
END $$;

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
                                       WHERE s.config_hash = a.config_hash AND s.outcome = 'succeeded'),
    'memory', jsonb_build_object('arch', rung_config_arch(j.target_config), 'gpu_mib', g.memory_total_mib,
                                 'observations', rung_memory_observations(rung_config_arch(j.target_config),
                                                                          g.memory_total_mib, j.id)))
  -- one primary-key probe per item and per row it joins (OFFSET 0: planned alone; see the
  -- heartbeats)
  FROM x CROSS JOIN f
  CROSS JOIN LATERAL (SELECT * FROM attempts a
                      WHERE a.id = x.id AND a.token = x.token AND (a.state = 'running') IS TRUE OFFSET 0) a
  CROSS JOIN LATERAL (SELECT * FROM jobs j WHERE j.id = a.job_id OFFSET 0) j
  LEFT JOIN LATERAL (SELECT * FROM gpus g WHERE g.uuid = a.gpu_uuid OFFSET 0) g ON true
$$;
