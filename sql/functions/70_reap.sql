-- The reaper: running attempts whose lease expired become lost; their job is queued again
-- unchanged, or fails once lost_count exceeds recovery.max_lost (no escalation), or ends
-- cancelled when a cancel was requested. SKIP LOCKED makes it safe on several replicas.
-- Returns [{"attempt_id", "job_id", "job_state"}].
CREATE OR REPLACE FUNCTION rung_reap(p_limit int) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  a attempts;
  j jobs;
  new_state text;
  why text;
  v_out jsonb := '[]';
BEGIN
  -- jobs are locked in id order, as every statement that locks several jobs does (a finish batch,
  -- rung_cancel_matching): two of them never wait on each other in a circle. A job has one running
  -- attempt, so this is the order of attempts_one_running, which holds only the running ones.
  FOR a IN SELECT * FROM attempts WHERE state = 'running' AND lease_expires_at < now()
           ORDER BY job_id LIMIT p_limit FOR UPDATE SKIP LOCKED LOOP
    UPDATE attempts SET state = 'lost', outcome = 'lost', ended_at = now() WHERE id = a.id;
    SELECT * INTO j FROM jobs WHERE id = a.job_id FOR UPDATE;
    IF j.cancel_requested THEN
      new_state := 'cancelled';
      why := 'attempt ' || a.number || ' lost after a cancel request';
    ELSIF j.lost_count + 1 > coalesce((j.recovery->>'max_lost')::int, 3) THEN
      new_state := 'failed';
      why := 'attempt ' || a.number || ' lost (lease expired); lost ' || (j.lost_count + 1)
             || ' times, more than max_lost ' || coalesce((j.recovery->>'max_lost')::int, 3);
    ELSE
      new_state := 'queued';
      why := 'attempt ' || a.number || ' lost (lease expired); queued again unchanged';
    END IF;
    UPDATE jobs SET state = new_state, lost_count = lost_count + 1, updated_at = now(),
      finished_at = CASE WHEN new_state = 'queued' THEN NULL ELSE now() END,
      result = CASE WHEN new_state = 'queued' THEN result
                    ELSE jsonb_build_object('attempt_id', a.id, 'class', 'lost', 'reason', why) END,
      next_action = CASE WHEN new_state = 'queued' THEN why ELSE NULL END
    WHERE id = j.id;
    INSERT INTO events (job_id, attempt_id, kind, from_state, to_state, reason, data)
    VALUES (j.id, a.id, 'attempt_lost', 'running', 'lost', why,
            jsonb_build_object('number', a.number, 'worker_id', a.worker_id, 'gpu_uuid', a.gpu_uuid)),
           (j.id, a.id, 'job_' || new_state, j.state, new_state, why, NULL);
    v_out := v_out || jsonb_build_array(jsonb_build_object('attempt_id', a.id, 'job_id', j.id,
                                                       'job_state', new_state));
  END LOOP;
  RETURN v_out;
END $$;
