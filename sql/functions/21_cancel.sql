-- Cancel: queued -> cancelled now; running -> cancel_requested; finished jobs unchanged.
-- Returns JOB, or NULL when there is no such job.
CREATE OR REPLACE FUNCTION rung_cancel(p_job bigint) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  j jobs;
BEGIN
  SELECT * INTO j FROM jobs WHERE id = p_job FOR UPDATE;
  IF NOT FOUND THEN RETURN NULL; END IF;
  IF j.state = 'queued' THEN
    UPDATE jobs SET state = 'cancelled', cancel_requested = true, finished_at = now(),
                    updated_at = now(), next_action = NULL,
                    result = jsonb_build_object('class', 'cancelled', 'reason', 'cancelled while queued')
    WHERE id = p_job RETURNING * INTO j;
    INSERT INTO events (job_id, kind, from_state, to_state, reason)
    VALUES (j.id, 'cancelled', 'queued', 'cancelled', 'cancelled while queued');
  ELSIF j.state = 'running' AND NOT j.cancel_requested THEN
    UPDATE jobs SET cancel_requested = true, updated_at = now(),
                    next_action = 'the worker stops the trainer at its next heartbeat'
    WHERE id = p_job RETURNING * INTO j;
    INSERT INTO events (job_id, kind, from_state, to_state, reason)
    VALUES (j.id, 'cancel_requested', 'running', 'running', 'cancel requested while running');
  END IF;
  RETURN rung_job_json(j);
END $$;
