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
