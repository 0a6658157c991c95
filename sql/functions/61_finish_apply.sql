-- Apply one DECISION of the recovery policy, and the helpers it shares with the batch
-- (62_finish_apply_batch.sql).

-- What next_config becomes in jobs.current_config: NULL when it is the target again.
CREATE OR REPLACE FUNCTION rung_config_or_null(p_config jsonb, p_target jsonb) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN p_config = p_target THEN NULL ELSE p_config END
$$;

-- Union of two constraint objects: exclusions accumulate, the newest min_gpu_memory_mib wins. A
-- decision that adds no constraint (most of them: every success) skips the two aggregate queries:
-- only merges write constraints, so a job's lists are already distinct and sorted (jsonb_agg
-- DISTINCT), and the merge of nothing is their copy. The checkpoint hold (recovery/resume.h) is the
-- new decision's alone: {"worker_id", "seconds", "attempt", "path"} becomes "hold" with "until" (now
-- plus the seconds, by the database's clock, which every claim reads); a decision without one
-- leaves none (an attempt ran since the last). STABLE for that now().
CREATE OR REPLACE FUNCTION rung_merge_constraints(old jsonb, new jsonb) RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN rung_merge_exclusions(old, new)
         || CASE WHEN jsonb_typeof(new->'hold') = 'object' AND jsonb_typeof(new->'hold'->'seconds') = 'number'
                 THEN jsonb_build_object('hold', ((new->'hold') - 'seconds')
                                                 || jsonb_build_object('until', now() + make_interval(
                                                      secs => (new->'hold'->>'seconds')::double precision)))
                 ELSE '{}' END;
END $$;

-- rung_merge_constraints' exclusions and memory floor (its comment).
CREATE OR REPLACE FUNCTION rung_merge_exclusions(old jsonb, new jsonb) RETURNS jsonb LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF coalesce(jsonb_typeof(new->'exclude_gpus') <> 'array' OR jsonb_array_length(new->'exclude_gpus') = 0, true)
     AND coalesce(jsonb_typeof(new->'exclude_workers') <> 'array' OR jsonb_array_length(new->'exclude_workers') = 0, true)
     AND coalesce(jsonb_typeof(new->'min_gpu_memory_mib') <> 'number', true)
     AND coalesce(jsonb_typeof(old->'exclude_gpus'), 'array') = 'array'
     AND coalesce(jsonb_typeof(old->'exclude_workers'), 'array') = 'array' THEN
    RETURN jsonb_build_object('exclude_gpus', coalesce(old->'exclude_gpus', '[]'),
                              'exclude_workers', coalesce(old->'exclude_workers', '[]'),
                              'min_gpu_memory_mib', coalesce(old->'min_gpu_memory_mib', 'null'));
  END IF;
  RETURN jsonb_build_object(
    'exclude_gpus', coalesce((SELECT jsonb_agg(DISTINCT x) FROM (
        SELECT jsonb_array_elements(CASE WHEN jsonb_typeof(old->'exclude_gpus') = 'array' THEN old->'exclude_gpus' ELSE '[]' END)
        UNION ALL
        SELECT jsonb_array_elements(CASE WHEN jsonb_typeof(new->'exclude_gpus') = 'array' THEN new->'exclude_gpus' ELSE '[]' END)) s(x)), '[]'),
    'exclude_workers', coalesce((SELECT jsonb_agg(DISTINCT x) FROM (
        SELECT jsonb_array_elements(CASE WHEN jsonb_typeof(old->'exclude_workers') = 'array' THEN old->'exclude_workers' ELSE '[]' END)
        UNION ALL
        SELECT jsonb_array_elements(CASE WHEN jsonb_typeof(new->'exclude_workers') = 'array' THEN new->'exclude_workers' ELSE '[]' END)) s(x)), '[]'),
    'min_gpu_memory_mib', CASE WHEN jsonb_typeof(new->'min_gpu_memory_mib') = 'number' THEN new->'min_gpu_memory_mib'
                               ELSE coalesce(old->'min_gpu_memory_mib', 'null') END);
END $$;

-- A FACTS count (the door lets them through up to 2^53) as an int column holds it: at most the int's
-- ceiling, NULL for NULL (LEAST alone would turn a missing figure into the ceiling: it skips NULLs).
CREATE OR REPLACE FUNCTION rung_int_capped(p bigint) RETURNS int LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN p IS NOT NULL THEN least(p, 2147483647)::int END
$$;

-- The step an attempt resumed from (attempts.resumed_step, migration 031): FACTS first_step when its
-- trainer said it resumed (the resuming signature), else NULL. The FACTS are checked at the door as
-- counts (up to 2^53), so every cast here goes through numeric and is bounded: a finish never fails
-- on a figure too large for an int.
CREATE OR REPLACE FUNCTION rung_resumed_step(p_facts jsonb) RETURNS int LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN jsonb_typeof(p_facts->'signatures'->'resuming') = 'number'
                   AND (p_facts->'signatures'->>'resuming')::numeric > 0
                   AND jsonb_typeof(p_facts->'first_step') = 'number'
                   AND (p_facts->>'first_step')::numeric BETWEEN 1 AND 2147483647
              THEN (p_facts->>'first_step')::numeric::int END
$$;

-- The GPU seconds a resume spared, estimated (attempts.resumed_gpu_s, migration 032): the steps it
-- did not run again (rung_resumed_step) at the pace of that attempt (FACTS train_ms over train_steps:
-- rung-worker's timing from the first step it saw to the last; the same config on the same GPU,
-- periodic samples and saves included). NULL when the attempt did not resume, when fewer than 10
-- steps were timed (too few to price thousands by), or from a worker that does not time them.
CREATE OR REPLACE FUNCTION rung_resumed_gpu_s(p_facts jsonb) RETURNS real LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN jsonb_typeof(p_facts->'train_ms') = 'number' AND jsonb_typeof(p_facts->'train_steps') = 'number'
                   AND (p_facts->>'train_steps')::numeric >= 10 AND (p_facts->>'train_ms')::numeric >= 0
              THEN (rung_resumed_step(p_facts) * ((p_facts->>'train_ms')::numeric / 1000)
                    / (p_facts->>'train_steps')::numeric)::real END
$$;

-- An ended attempt's outcome from its decision's class: succeeded, cancelled, preempted (migration
-- 029), else failed. The one place the mapping is written (rung_finish_apply and the set-wise
-- rung_finish_apply_batch, where it is inlined).
CREATE OR REPLACE FUNCTION rung_attempt_outcome(p_class text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE p_class WHEN 'success' THEN 'succeeded' WHEN 'cancelled' THEN 'cancelled'
                      WHEN 'preempted' THEN 'preempted' ELSE 'failed' END
$$;

-- Apply a DECISION to the running attempt (id, token): end the attempt, move the job, write
-- events, mark the GPU, record an env fault, open the escalation with its report ({"markdown",
-- "json"} or NULL). The job's current config becomes next_config, or NULL when that is the target
-- again; the result names the config that succeeded only when it was not the target. Reads back
-- only the columns it uses: a row variable would de-TOAST every config and FACTS it holds.
-- Returns {"attempt_id", "job_id", "job_state", "escalation_id", "decision"}, or NULL when the
-- fence fails.
CREATE OR REPLACE FUNCTION rung_finish_apply(p_attempt bigint, p_token text, p_facts jsonb, p_decision jsonb,
                                             p_report jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  a_id bigint;
  a_job bigint;
  a_number int;
  a_outcome text;
  a_gpu text;
  a_config jsonb;
  j_state text;
  j_cancel boolean;
  j_dependents boolean;
  d jsonb := p_decision;
  cls text := p_decision->>'class';
  v_outcome text;
  new_state text := coalesce(p_decision->>'job_state', 'failed');
  mark text;
  esc_id bigint;
BEGIN
  v_outcome := rung_attempt_outcome(cls);
  UPDATE attempts SET state = 'ended', outcome = v_outcome, ended_at = now(),
    class = cls, rule = d->>'rule', evidence = d->'evidence', action = d->>'action',
    rung = d->>'rung', changes = d->'changes', facts = p_facts - 'log_tail', resumed_step = rung_resumed_step(p_facts),
    resumed_gpu_s = rung_resumed_gpu_s(p_facts),
    log_tail = coalesce(p_facts->'log_tail', '[]'),
    phase = coalesce(p_facts->>'phase', phase),
    -- the door lets counts up to 2^53 through: kept at the int's ceiling, never a failed finish
    step = coalesce(rung_int_capped((p_facts->>'last_step')::bigint), step),
    total_steps = coalesce(rung_int_capped((p_facts->>'total_steps')::bigint), total_steps)
  WHERE id = p_attempt AND token = p_token AND state = 'running'
  RETURNING id, job_id, number, outcome, gpu_uuid, config
  INTO a_id, a_job, a_number, a_outcome, a_gpu, a_config;
  IF NOT FOUND THEN RETURN NULL; END IF;
  SELECT state, cancel_requested, has_dependents INTO j_state, j_cancel, j_dependents FROM jobs WHERE id = a_job FOR UPDATE;
  IF j_cancel AND new_state = 'queued' THEN
    new_state := 'cancelled';
    -- (no checkpoint hold: the job does not wait for a GPU)
    d := d || jsonb_build_object('job_state', 'cancelled', 'next_config', NULL,
                                 'reason', 'cancelled: ' || coalesce(d->>'reason', ''),
                                 -- (a server decision's constraints are null: no hold to drop)
                                 'constraints', CASE WHEN jsonb_typeof(d->'constraints') = 'object'
                                                     THEN (d->'constraints') - 'hold' ELSE d->'constraints' END);
  END IF;
  IF new_state NOT IN ('queued', 'succeeded', 'failed', 'cancelled') THEN
    RAISE EXCEPTION 'decision job_state % is not a job state', new_state;
  END IF;
  UPDATE jobs SET
    state = new_state,
    -- a job that ends succeeded with a config other than the one this attempt ran (a scale-up
    -- step that failed, after a success: the decision's result.config) keeps that one as current
    current_config = CASE WHEN jsonb_typeof(d->'next_config') = 'object'
                          THEN rung_config_or_null(d->'next_config', target_config)
                          WHEN new_state = 'succeeded' AND jsonb_typeof(d->'result'->'config') = 'object'
                          THEN rung_config_or_null(d->'result'->'config', target_config)
                          ELSE current_config END,
    constraints = CASE WHEN jsonb_typeof(d->'constraints') = 'object'
                       THEN rung_merge_constraints(constraints, d->'constraints') ELSE constraints END,
    recovery_state = CASE WHEN jsonb_typeof(d->'recovery_state') = 'object' THEN d->'recovery_state'
                          ELSE recovery_state END,
    result = CASE WHEN new_state = 'queued' THEN result
                  ELSE jsonb_build_object('attempt_id', a_id, 'class', cls, 'rule', d->>'rule',
                                          'reason', d->>'reason')
                       || CASE WHEN new_state = 'succeeded' AND a_config IS NULL THEN '{}'::jsonb
                               ELSE jsonb_build_object('config', CASE WHEN new_state = 'succeeded' THEN a_config END) END
                       || CASE WHEN jsonb_typeof(d->'result') = 'object' THEN d->'result' ELSE '{}' END END,
    finished_at = CASE WHEN new_state = 'queued' THEN NULL ELSE now() END,
    next_action = CASE WHEN coalesce(d->'recovery_state'->>'next_action', '') <> ''
                         THEN d->'recovery_state'->>'next_action'
                       WHEN jsonb_typeof(d->'escalation') = 'object' THEN d->'escalation'->>'recommendation'
                       WHEN new_state = 'queued' THEN d->>'reason' ELSE NULL END,
    updated_at = now()
  WHERE id = a_job;
  INSERT INTO events (job_id, attempt_id, kind, from_state, to_state, reason, data)
  VALUES (a_job, a_id, 'attempt_ended', 'running', a_outcome, d->>'reason',
          jsonb_build_object('number', a_number, 'class', cls, 'rule', d->>'rule',
                             'evidence', d->'evidence', 'action', d->>'action', 'rung', d->>'rung',
                             'changes', d->'changes')),
         (a_job, a_id, 'job_' || new_state, j_state, new_state, d->>'reason', NULL);
  IF jsonb_typeof(d->'gpu') = 'object' AND a_gpu IS NOT NULL THEN
    mark := d->'gpu'->>'mark';
    UPDATE gpus SET state = CASE WHEN mark = 'quarantine' THEN 'quarantined'
                                 WHEN state = 'quarantined' THEN state ELSE 'suspect' END,
                    reason = d->>'reason', updated_at = now()
    WHERE uuid = coalesce(d->'gpu'->>'uuid', a_gpu);
    INSERT INTO events (job_id, attempt_id, kind, reason, data)
    VALUES (a_job, a_id, 'gpu_marked', d->>'reason',
            jsonb_build_object('gpu_uuid', coalesce(d->'gpu'->>'uuid', a_gpu), 'mark', mark));
  END IF;
  -- a fault of the GPU counts toward its quarantine; an env_fault the policy did not put on the GPU
  -- (a stalled trainer that left it clean: no mark) does not
  IF cls = 'env_fault' AND a_gpu IS NOT NULL AND jsonb_typeof(d->'gpu') = 'object' THEN
    INSERT INTO gpu_faults (gpu_uuid, job_id, attempt_id) VALUES (a_gpu, a_job, a_id);
  END IF;
  IF jsonb_typeof(d->'escalation') = 'object' THEN
    INSERT INTO escalations (job_id, attempt_id, trigger, summary, recommendation, report_markdown, report)
    VALUES (a_job, a_id, coalesce(d->'escalation'->>'trigger', 'unknown'), d->'escalation'->>'summary',
            d->'escalation'->>'recommendation', p_report->>'markdown', p_report->'json')
    RETURNING id INTO esc_id;
    INSERT INTO events (job_id, attempt_id, kind, reason, data)
    VALUES (a_job, a_id, 'escalated', d->'escalation'->>'summary',
            jsonb_build_object('escalation_id', esc_id, 'trigger', d->'escalation'->>'trigger'));
  END IF;
  RETURN jsonb_build_object('attempt_id', a_id, 'job_id', a_job, 'job_state', new_state,
                            'escalation_id', esc_id, 'decision', d)
         -- jobs were submitted to run after this one (migration 033): its success may have queued some
         -- (the trigger jobs_after_release), so rungd wakes the lease waiters after the commit
         || CASE WHEN new_state IN ('succeeded', 'failed', 'cancelled') AND j_dependents THEN '{"dependents": true}'::jsonb ELSE '{}' END;
END $$;
