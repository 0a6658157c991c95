-- Operators' changes to a job after submit: retry (a failed or cancelled job queued again),
-- reprioritize (a queued, scheduled or running job's priority) and a move to another pool.

-- Retry: a job that failed or was cancelled goes back to the queue (POST /v1/jobs/{id}/retry), for
-- when the cause was outside the config rung changes: support replaced a GPU, added a bigger one,
-- freed host memory, the dataset was fixed, or a cancel was a mistake.
--
-- rung_retry(job, from, note, by): under the job's row lock, a failed or cancelled job becomes
-- queued again, in one transaction:
--   - P_FROM 'current' (the default) resumes where recovery stopped: the current config, the
--     ladder position, the ceilings and the placement constraints stay;
--     'target' starts over from the submitted config: current_config NULL (the target), a fresh
--     recovery_state, no constraints; the memory model still applies what it learned, because the
--     next attempt counts as the job's first at its target (rung_claim_batch);
--   - either way the budgets start again: recovery_state.budget_from is the number of attempts
--     made so far, and the policy counts max_attempts, max_gpu_seconds, max_env_retries and the
--     host-OOM re-run only over attempts after it (recovery/policy.c); lost_count starts at 0.
--     The history stays and still informs the policy (succeeded configs, the GPUs' faults);
--   - recovery_state.retried keeps the story (when, by whom, from what, the note, the previous
--     state and result); the result, finished_at and cancel_requested are cleared;
--   - the job's own open or acknowledged escalations (budget_exhausted, ladder_exhausted: what
--     this job could not do) are resolved with the note (rung_escalation_set: the event
--     escalation_resolved each), since the retry answers them; those about hardware (gpu_quarantined, env_fault_regression,
--     host_oom_repeated) stay open for support, whoever retries (a submitter may retry its own
--     job, not resolve support's escalations);
--   - an event `retried` (previous state -> queued) with the same data;
--   - a job that runs after others (migration 033) and never started: it waits again, in the state
--     'scheduled', for those of them that have not succeeded yet (one retention deleted no longer
--     holds it), and is queued only when none is left;
--   - the ending it takes back stays counted in /metrics' rung_jobs{state} (the ended states count
--     endings): one more in metrics_pruned (migration 016), as for a job retention deleted.
-- Returns {"status": "ok", "job": JOB}; {"status": "conflict", "job": JOB} when the job is queued,
-- running or succeeded (nothing changes); NULL when there is no such job. rungd wakes the waiters
-- after the commit (lease_announce), as for every re-queue.
-- The attempts a job made before its last retry (recovery_state.budget_from; 0: never retried):
-- those spend no budget and bar no GPU in the claim, and the attempt after them is a first attempt
-- at the target for the lease-time memory check. The one place the key is read in SQL
-- (40_claim.sql, 41_claim_batch.sql); recovery/policy.c reads it for the budgets.
CREATE OR REPLACE FUNCTION rung_budget_from(p_recovery_state jsonb) RETURNS int
LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce((p_recovery_state->>'budget_from')::int, 0)
$$;

CREATE OR REPLACE FUNCTION rung_retry(p_job bigint, p_from text, p_note text, p_by text) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  j jobs;
  v_from text := coalesce(p_from, 'current');
  v_story jsonb;
  v_why text;
  v_waits bigint[];
  v_state text;
BEGIN
  IF v_from NOT IN ('current', 'target') THEN
    RAISE EXCEPTION 'rung_retry: from must be current or target, not %', v_from;
  END IF;
  SELECT * INTO j FROM jobs WHERE id = p_job FOR UPDATE;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  IF j.state NOT IN ('failed', 'cancelled') THEN
    RETURN jsonb_build_object('status', 'conflict', 'job', rung_job_json(j));
  END IF;
  v_story := jsonb_build_object('at', now(), 'by', p_by, 'from', v_from, 'note', p_note,
                                'previous_state', j.state, 'previous_result', j.result,
                                'budget_from', j.attempts_count);
  v_why := 'retried' || coalesce(' by ' || p_by, '') || ' from the ' || v_from || ' config'
           || coalesce(': ' || p_note, '');
  PERFORM rung_escalation_set(x.id, 'resolved', v_why)
  FROM escalations x
  WHERE x.job_id = p_job AND x.state <> 'resolved' AND x.trigger IN ('budget_exhausted', 'ladder_exhausted')
  ORDER BY x.id;
  INSERT INTO metrics_pruned AS m (kind, label1, label2, n) VALUES ('job', j.state, '', 1)
  ON CONFLICT (kind, label1, label2) DO UPDATE SET n = m.n + 1;
  -- (under the job's row lock: a finish of one of them waits for this to commit, then shrinks the new list)
  -- (those that have not released it yet, by its after_when: rung_after_pending; one that succeeded
  -- is not waited for, even by a job that was to run only after failures: the retry asks it to run)
  v_waits := CASE WHEN j.waits_for IS NOT NULL THEN rung_after_pending(j.waits_for, j.after_when) END;
  v_state := CASE WHEN v_waits IS NULL THEN 'queued' ELSE 'scheduled' END;
  INSERT INTO event_log (job_id, kind, from_state, to_state, reason, data)
  VALUES (j.id, 'retried', j.state, v_state, v_why, v_story);
  -- (a start deadline is spent: a person asked it to run now; migration 039)
  UPDATE jobs SET state = v_state, waits_for = v_waits, cancel_requested = false, finished_at = NULL, result = NULL, lost_count = 0,
                  start_by = NULL,
                  current_config = CASE WHEN v_from = 'target' THEN NULL ELSE current_config END,
                  constraints = CASE WHEN v_from = 'target' THEN '{}'::jsonb ELSE constraints END,
                  recovery_state = CASE WHEN v_from = 'target' THEN '{}'::jsonb ELSE recovery_state END
                                   || jsonb_build_object('budget_from', j.attempts_count, 'retried', v_story,
                                                         'next_action', ''),
                  next_action = CASE WHEN v_waits IS NULL
                                     THEN 'queued again by a retry from the ' || v_from || ' config; waits for a GPU'
                                     ELSE rung_after_wait_text(v_waits, j.after_when) END,
                  updated_at = now()
  WHERE id = p_job RETURNING * INTO j;
  RETURN jsonb_build_object('status', 'ok', 'job', rung_job_json(j));
END $$;

-- Reprioritize: rung_set_priority(job, priority, by) sets a queued, scheduled or running job's priority
-- (lower runs first; a scheduled job's counts once it is queued at its start time, a running job's
-- when it is queued again) under its row lock, with an event
-- priority_changed {"from", "to", "by"}. Returns {"status": "ok"|"conflict", "job": JOB} (conflict:
-- the job has ended; an unchanged priority is ok and writes nothing), or NULL when there is no such
-- job. The claim reads the order from jobs_claim, so the change holds from the next claim on.
CREATE OR REPLACE FUNCTION rung_set_priority(p_job bigint, p_priority int, p_by text) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  j jobs;
  v_old int;
BEGIN
  SELECT * INTO j FROM jobs WHERE id = p_job FOR UPDATE;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  IF j.state NOT IN ('queued', 'scheduled', 'running') THEN
    RETURN jsonb_build_object('status', 'conflict', 'job', rung_job_json(j));
  END IF;
  v_old := j.priority;
  IF v_old <> p_priority THEN
    UPDATE jobs SET priority = p_priority, updated_at = now() WHERE id = p_job RETURNING * INTO j;
    INSERT INTO event_log (job_id, kind, from_state, to_state, reason, data)
    VALUES (j.id, 'priority_changed', j.state, j.state,
            'priority ' || v_old || ' -> ' || p_priority || coalesce(' by ' || p_by, ''),
            jsonb_build_object('from', v_old, 'to', p_priority, 'by', p_by));
  END IF;
  RETURN jsonb_build_object('status', 'ok', 'job', rung_job_json(j));
END $$;

-- Move a job to another pool (migration 026; POST /v1/jobs/{id}/pool): rung_set_pool(job, pool, by)
-- under the job's row lock, for every job but a succeeded one: a queued job is claimed from the new
-- pool's queue from the next claim on; a scheduled one is queued there at its start time; a running
-- one's attempt goes on where it is, and the job is queued in the new pool if it is queued again (an
-- OOM's next rung); a failed or cancelled one is queued there by its retry (move it, then retry it:
-- the ladder ran out on 24 GiB cards, try the H200s). An event pool_changed {"from", "to", "by"}
-- when it changes. Returns {"status": "ok"|"conflict"|"pool_refused", "job": JOB} (conflict:
-- succeeded; pool_refused: the job's owner's token may not use that pool, migration 027, with
-- "pools": its pools; an unchanged pool is ok and writes nothing), or NULL when there is no such
-- job. rungd wakes the waiters after the commit (the new pool's parked GPUs).
CREATE OR REPLACE FUNCTION rung_set_pool(p_job bigint, p_pool text, p_by text) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  j jobs;
  v_old text;
BEGIN
  SELECT * INTO j FROM jobs WHERE id = p_job FOR UPDATE;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  IF j.state = 'succeeded' THEN
    RETURN jsonb_build_object('status', 'conflict', 'job', rung_job_json(j));
  END IF;
  v_old := j.pool;
  IF v_old <> p_pool AND NOT rung_pool_allowed(j.owner, p_pool) THEN
    RETURN jsonb_build_object('status', 'pool_refused', 'job', rung_job_json(j)) || rung_submit_pool_refusal(j.owner, p_pool);
  END IF;
  IF v_old <> p_pool THEN
    UPDATE jobs SET pool = p_pool, updated_at = now() WHERE id = p_job RETURNING * INTO j;
    INSERT INTO event_log (job_id, kind, from_state, to_state, reason, data)
    VALUES (j.id, 'pool_changed', j.state, j.state,
            'pool ' || v_old || ' -> ' || p_pool || coalesce(' by ' || p_by, ''),
            jsonb_build_object('from', v_old, 'to', p_pool, 'by', p_by));
  END IF;
  RETURN jsonb_build_object('status', 'ok', 'job', rung_job_json(j));
END $$;
