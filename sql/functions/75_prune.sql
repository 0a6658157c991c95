-- Retention (--retain-days, server/retention.c): deletes up to P_LIMIT jobs that ended (succeeded,
-- failed, cancelled) more than P_DAYS days ago, with their attempts, events, escalations and
-- webhook deliveries; a job whose escalation is still open or acknowledged stays until support
-- resolves it. Returns how many jobs it deleted.
--
-- Finding them costs O(batch), not O(history), and needs no index of its own: the primary key is
-- walked in id order (ids grow with creation) and the walk stops at the first job created within
-- the window, since a job ends after it was created. What it passes over on the way (an old job
-- still queued or running, one that ended recently, one waiting for support) is read again each
-- run: few.
-- The memory model forgets the observations of the attempts it deletes (it reads the newest ones);
-- an Idempotency-Key of a deleted job can be used again.
CREATE OR REPLACE FUNCTION rung_prune(p_days int, p_limit int) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
  cutoff timestamptz := now() - make_interval(days => p_days);
  r record;
  cand bigint[] := '{}';
  ids bigint[];
BEGIN
  IF p_days IS NULL OR p_days < 1 OR p_limit IS NULL OR p_limit < 1 THEN
    RETURN 0;
  END IF;
  FOR r IN SELECT j.id, j.state, j.created_at, j.finished_at FROM jobs j ORDER BY j.id LOOP
    EXIT WHEN r.created_at >= cutoff OR cardinality(cand) >= p_limit;
    IF r.state IN ('succeeded', 'failed', 'cancelled') AND r.finished_at < cutoff
       AND NOT EXISTS (SELECT 1 FROM escalations e WHERE e.job_id = r.id AND e.state <> 'resolved') THEN
      cand := cand || r.id;
    END IF;
  END LOOP;
  IF cardinality(cand) = 0 THEN
    RETURN 0;
  END IF;
  -- the same test again under the row lock (another replica may prune the same jobs: SKIP LOCKED)
  SELECT coalesce(array_agg(j.id), '{}') INTO ids FROM (
    SELECT j.id FROM jobs j
    WHERE j.id = ANY (cand) AND j.state IN ('succeeded', 'failed', 'cancelled') AND j.finished_at < cutoff
      AND NOT EXISTS (SELECT 1 FROM escalations e WHERE e.job_id = j.id AND e.state <> 'resolved')
    FOR UPDATE SKIP LOCKED) j;
  IF cardinality(ids) = 0 THEN
    RETURN 0;
  END IF;
  DELETE FROM webhook_outbox w USING escalations e WHERE w.escalation_id = e.id AND e.job_id = ANY (ids);
  DELETE FROM escalations WHERE job_id = ANY (ids);
  DELETE FROM event_log WHERE job_id = ANY (ids);
  DELETE FROM attempts WHERE job_id = ANY (ids);
  DELETE FROM jobs WHERE id = ANY (ids);
  RETURN cardinality(ids);
END $$;
