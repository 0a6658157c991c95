-- Apply many DECISIONs in one statement: p is [{"i", "id", "token", "facts", "decision",
-- "report", "obs"}], in attempt id order ("obs": the attempt's memory OBSERVATION, stored with its
-- FACTS.peak on the attempt, migrations/014_memory.sql). A decision that only ends the attempt and moves the job (most of
-- them: every success, every plain ladder retry) is applied set-wise: one UPDATE of the attempts,
-- one of the jobs, one INSERT of the events, each row found by primary key, locked in id order
-- (attempts, then jobs). A decision that marks a GPU, opens an escalation or records an env fault
-- goes through rung_finish_apply, item by item, after the others. Same fences and results as
-- rung_finish_apply (with its "dependents"): rows (i, reply), none for an item whose attempt is not the running one with
-- that token. An error in any item fails the whole statement (nothing is applied): rungd then
-- applies the items one at a time.
CREATE OR REPLACE FUNCTION rung_finish_apply_batch(p jsonb) RETURNS TABLE (i int, doc jsonb)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  e jsonb;
BEGIN
  -- (jsonpath tests scan p in place: no element of it is copied)
  -- No NOTIFY here: rungd wakes the replicas after the commit when a decision re-queued
  -- (server/lease.c lease_announce: notifying transactions cannot share a WAL flush)
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
        outcome = rung_attempt_outcome(x.decision->>'class'),
        ended_at = now(), class = x.decision->>'class', rule = x.decision->>'rule',
        evidence = x.decision->'evidence', action = x.decision->>'action', rung = x.decision->>'rung',
        changes = x.decision->'changes', facts = x.facts - 'log_tail', resumed_step = rung_resumed_step(x.facts),
        resumed_gpu_s = rung_resumed_gpu_s(x.facts),
        log_tail = coalesce(x.facts->'log_tail', '[]'),
        phase = coalesce(x.facts->>'phase', t.phase),
        -- counts up to 2^53 pass the door: kept at the int's ceiling (rung_finish_apply does the same)
        step = coalesce(rung_int_capped((x.facts->>'last_step')::bigint), t.step),
        total_steps = coalesce(rung_int_capped((x.facts->>'total_steps')::bigint), t.total_steps),
        -- the memory model's data (014): peak from FACTS.peak, the OBSERVATION rungd built; the config's features
        -- once: in mem_obs when there is an OBSERVATION, in mem_features otherwise (coalesce(mem_obs->'features', mem_features))
        peak_mib = rung_int_capped((x.facts->'peak'->>'mib')::bigint), peak_phase = x.facts->'peak'->>'phase',
        mem_features = CASE WHEN x.obs->>'outcome' IN ('fit', 'oom') THEN NULL ELSE x.obs->'features' END, mem_arch = x.obs->>'arch', mem_gpu_mib = (x.obs->>'gpu_mib')::int,
        mem_obs = CASE WHEN x.obs->>'outcome' IN ('fit', 'oom') THEN x.obs END
      FROM x JOIN la ON la.i = x.i
      WHERE t.id = la.id AND t.id = ANY (ARRAY(SELECT la.id FROM la))
      RETURNING x.i, t.id, t.job_id, t.number, t.outcome, t.config, x.decision),
    lj AS MATERIALIZED (
      SELECT jb.id, jb.state, jb.cancel_requested, jb.has_dependents FROM jobs jb
      WHERE jb.id = ANY (ARRAY(SELECT a.job_id FROM a)) ORDER BY jb.id FOR UPDATE OF jb),
    d AS MATERIALIZED (
      SELECT a.*, lj.state AS old_state, lj.has_dependents, dd, coalesce(dd->>'job_state', 'failed') AS new_state
      FROM a JOIN lj ON lj.id = a.job_id,
      LATERAL (SELECT CASE WHEN lj.cancel_requested AND coalesce(a.decision->>'job_state', 'failed') = 'queued'
                           -- (no checkpoint hold: the job does not wait for a GPU)
                           THEN a.decision || jsonb_build_object('job_state', 'cancelled', 'next_config', NULL,
                                                                 'reason', 'cancelled: ' || coalesce(a.decision->>'reason', ''),
                                                                 'constraints', CASE WHEN jsonb_typeof(a.decision->'constraints') = 'object'
                                                                                     THEN (a.decision->'constraints') - 'hold'
                                                                                     ELSE a.decision->'constraints' END)
                           ELSE a.decision END AS dd) c),
    uj AS (
      UPDATE jobs SET
        state = d.new_state,
        -- (as rung_finish_apply: a job ending succeeded keeps the config it succeeded with)
        current_config = CASE WHEN jsonb_typeof(d.dd->'next_config') = 'object'
                              THEN rung_config_or_null(d.dd->'next_config', jobs.target_config)
                              WHEN d.new_state = 'succeeded' AND jsonb_typeof(d.dd->'result'->'config') = 'object'
                              THEN rung_config_or_null(d.dd->'result'->'config', jobs.target_config)
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
      -- one row per finish: the attempt's end, carrying the job's move (the events view shows both, 015)
      INSERT INTO event_log (job_id, attempt_id, kind, from_state, to_state, reason, data)
      SELECT d.job_id, d.id, 'attempt_ended', 'running', d.outcome, d.dd->>'reason',
             jsonb_build_object('number', d.number, 'class', d.dd->>'class', 'rule', d.dd->>'rule',
                                'evidence', d.dd->'evidence', 'action', d.dd->>'action', 'rung', d.dd->>'rung',
                                'changes', d.dd->'changes',
                                'job_event', jsonb_build_object('kind', 'job_' || d.new_state,
                                                                'from_state', d.old_state, 'to_state', d.new_state))
      FROM d ORDER BY d.id)
    -- a decision whose job_state is not a job state fails the jobs CHECK, as rung_finish_apply's
    -- RAISE does: the statement fails and rungd applies the items one at a time
    SELECT d.i, jsonb_build_object('attempt_id', d.id, 'job_id', d.job_id, 'job_state', d.new_state,
                                   'escalation_id', NULL, 'decision', d.dd)
                || CASE WHEN d.new_state IN ('succeeded', 'failed', 'cancelled') AND d.has_dependents THEN '{"dependents": true}'::jsonb
                        ELSE '{}' END
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
        peak_mib = rung_int_capped((e->'facts'->'peak'->>'mib')::bigint), peak_phase = e->'facts'->'peak'->>'phase',
        mem_features = CASE WHEN e->'obs'->>'outcome' IN ('fit', 'oom') THEN NULL ELSE e->'obs'->'features' END, mem_arch = e->'obs'->>'arch', mem_gpu_mib = (e->'obs'->>'gpu_mib')::int,
        mem_obs = CASE WHEN e->'obs'->>'outcome' IN ('fit', 'oom') THEN e->'obs' END
      WHERE id = (e->>'id')::bigint;
    END IF;
    RETURN NEXT;
  END LOOP;
END $$;
