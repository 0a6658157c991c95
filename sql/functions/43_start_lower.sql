-- Issue 12: a first attempt whose config the memory model predicts not to fit the leased GPU starts
-- at the config predicted to fit (server/lease.c, policy_initial). rungd calls this between the claim
-- and its answer to the worker, so the database records the lowered config before any worker runs it.
--
-- rung_start_lower(attempt, token, config, reason, data): for attempt P_ATTEMPT (token P_TOKEN)
-- that is still running the job's target (its config and the job's current_config stored NULL, the
-- job running), in one transaction: the attempt's config and config_hash and the job's
-- current_config become P_CONFIG, recovery_state.started_lower becomes P_DATA (the story: reason,
-- rungs, changes, estimate; the policy keeps keys it does not own), and an event `started_lower`
-- (P_REASON, P_DATA) is logged. Returns the config as text (what the worker is sent and what was
-- hashed), or NULL when the attempt is not in that state any more (nothing changed: the lease is
-- answered as claimed); an error changes nothing either.
CREATE OR REPLACE FUNCTION rung_start_lower(p_attempt bigint, p_token text, p_config jsonb, p_reason text,
                                            p_data jsonb) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  cfg text := p_config::text;
  v_job bigint;
BEGIN
  UPDATE attempts SET config = p_config, config_hash = md5(cfg)
  WHERE id = p_attempt AND token = p_token AND state = 'running' AND config IS NULL
  RETURNING job_id INTO v_job;
  IF v_job IS NULL THEN
    RETURN NULL;
  END IF;
  UPDATE jobs SET current_config = p_config, updated_at = now(),
                  recovery_state = recovery_state || jsonb_build_object('started_lower', p_data)
  WHERE id = v_job AND state = 'running' AND current_config IS NULL;
  IF NOT FOUND THEN
    -- cannot happen while the attempt runs the target; rolls the attempt's change back with it
    RAISE EXCEPTION 'rung_start_lower: job % of attempt % is not running its target', v_job, p_attempt;
  END IF;
  INSERT INTO event_log (job_id, attempt_id, kind, reason, data)
  VALUES (v_job, p_attempt, 'started_lower', p_reason, p_data);
  RETURN cfg;
END $$;

-- Issue 12's other answer at lease time: every rung of the ladder is predicted to fail for sure on
-- the leased GPU and the fleet has a bigger one (policy_initial's "requeue_bigger"). rungd calls this
-- between the claim and its answer instead of handing the worker an attempt that would only walk the
-- ladder into the finish path's own requeue_bigger.
--
-- rung_start_bigger(attempt, token, min_mib, reason, data): for attempt P_ATTEMPT (token P_TOKEN)
-- that is still running the job's target (its config stored NULL, the job running with
-- current_config NULL), in one transaction: the claim is undone as rung_release does (the attempt
-- never ran: it disappears, attempts_count - 1, the job queued again, or cancelled when a cancel
-- was asked meanwhile), the job's constraints get min_gpu_memory_mib of at least P_MIN_MIB (merged
-- as a finish merges them), recovery_state.started_bigger becomes P_DATA (the story: reason, the
-- GPU, the estimates), next_action says where it runs next, and an event `started_bigger`
-- (P_REASON, P_DATA) is logged. No NOTIFY here: rungd wakes the waiters after the commit
-- (lease_announce), as for every re-queue. Returns true when it did all that, false when the attempt
-- is not in that state any more (nothing changed: the lease is answered as claimed); an error
-- changes nothing either.
CREATE OR REPLACE FUNCTION rung_start_bigger(p_attempt bigint, p_token text, p_min_mib int, p_reason text,
                                             p_data jsonb) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  a attempts;
  v_state text;
BEGIN
  DELETE FROM attempts WHERE id = p_attempt AND token = p_token AND state = 'running' AND config IS NULL
  RETURNING * INTO a;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  UPDATE jobs SET state = CASE WHEN cancel_requested THEN 'cancelled' ELSE 'queued' END,
                  finished_at = CASE WHEN cancel_requested THEN now() END,
                  attempts_count = attempts_count - 1,
                  constraints = rung_merge_constraints(constraints, jsonb_build_object('min_gpu_memory_mib',
                                  greatest(p_min_mib, CASE WHEN jsonb_typeof(constraints->'min_gpu_memory_mib') = 'number'
                                                           THEN (constraints->>'min_gpu_memory_mib')::numeric::int END))),
                  recovery_state = recovery_state || jsonb_build_object('started_bigger', p_data),
                  next_action = CASE WHEN cancel_requested THEN NULL
                                     ELSE 'run the target config on a GPU with at least ' || p_min_mib || ' MiB' END,
                  updated_at = now()
  WHERE id = a.job_id AND state = 'running' AND current_config IS NULL
  RETURNING state INTO v_state;
  IF NOT FOUND THEN
    -- cannot happen while the attempt runs the target; rolls the attempt's removal back with it
    RAISE EXCEPTION 'rung_start_bigger: job % of attempt % is not running its target', a.job_id, p_attempt;
  END IF;
  INSERT INTO event_log (job_id, attempt_id, kind, from_state, to_state, reason, data)
  VALUES (a.job_id, a.id, 'started_bigger', 'running', v_state, p_reason, p_data);
  RETURN true;
END $$;
