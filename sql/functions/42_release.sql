-- Undo a claim whose reply could not be delivered: the attempt never ran, so it disappears and
-- the job is queued again as it was. Returns true when it released something.
CREATE OR REPLACE FUNCTION rung_release(p_attempt bigint, p_token text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  a attempts;
BEGIN
  DELETE FROM attempts WHERE id = p_attempt AND token = p_token AND state = 'running'
  RETURNING * INTO a;
  IF NOT FOUND THEN RETURN false; END IF;
  UPDATE jobs SET state = CASE WHEN cancel_requested THEN 'cancelled' ELSE 'queued' END,
                  finished_at = CASE WHEN cancel_requested THEN now() END,
                  attempts_count = attempts_count - 1, updated_at = now()
  WHERE id = a.job_id;
  INSERT INTO events (job_id, attempt_id, kind, from_state, to_state, reason)
  VALUES (a.job_id, a.id, 'lease_released', 'running', 'queued',
          'the worker went away before it received the lease');
  RETURN true;
END $$;
