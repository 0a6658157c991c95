-- Retention (--retain-days, server/retention.c): deletes up to P_LIMIT jobs that ended (succeeded,
-- failed, cancelled) more than P_DAYS days ago, with their attempts (and their trainer output),
-- events, escalations and webhook deliveries; a job whose escalation is still open or acknowledged
-- stays until support resolves it, and so does a job that a scheduled job still waits for (migration
-- 033: it may yet be retried and succeed). What the deleted rows counted in /metrics' history goes to metrics_pruned first
-- (P_BOUNDS: the lease-wait histogram's bounds, as /metrics passes them), so no counter falls. Besides
-- migration 016's kinds: 'attempt_gpu_s' (label1 outcome, label2 class) and 'owner_gpu_s' (label1 the
-- owner, label2 succeeded/oom/failed/cancelled/lost), the GPU seconds of the attempts deleted, and
-- 'resumed' (label1 attempts/steps, migration 031): the resumed attempts deleted and their steps.
-- Returns how many jobs it deleted. Only those three end states are ever deleted: a queued,
-- scheduled (migration 025, however far its start time lies) or running job never is.
--
-- Finding them costs O(batch), not O(history), and needs no index of its own: the primary key is
-- walked in id order (ids grow with creation) and the walk stops at the first job created within
-- the window, since a job ends after it was created. What it passes over on the way (an old job
-- still queued or running, one that ended recently, one waiting for support) is read again each
-- run: few.
-- The memory model forgets the observations of the attempts it deletes (it reads the newest ones);
-- an Idempotency-Key of a deleted job can be used again.
CREATE OR REPLACE FUNCTION rung_prune(p_days int, p_limit int, p_bounds float8[]) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
  cutoff timestamptz := now() - make_interval(days => p_days);
  r record;
  cand bigint[] := '{}';
  ids bigint[];
BEGIN
  IF p_days IS NULL OR p_days < 1 OR p_limit IS NULL OR p_limit < 1 THEN
    RETURN 0;
  END IF;
  -- a quota webhook's rows (migration 038) belong to no job: by their age alone, at every run
  DELETE FROM webhook_outbox WHERE kind = 'quota' AND created_at < cutoff;
  FOR r IN SELECT j.id, j.state, j.created_at, j.finished_at, j.has_dependents FROM jobs j ORDER BY j.id LOOP
    EXIT WHEN r.created_at >= cutoff OR cardinality(cand) >= p_limit;
    IF r.state IN ('succeeded', 'failed', 'cancelled') AND r.finished_at < cutoff
       AND NOT EXISTS (SELECT 1 FROM escalations e WHERE e.job_id = r.id AND e.state <> 'resolved')
       AND NOT (r.has_dependents AND rung_job_awaited(r.id)) THEN
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
      AND NOT (j.has_dependents AND rung_job_awaited(j.id))
    FOR UPDATE SKIP LOCKED) j;
  IF cardinality(ids) = 0 THEN
    RETURN 0;
  END IF;
  WITH pw AS MATERIALIZED (SELECT v.w FROM lease_waits v WHERE v.job_id = ANY (ids)),
  c AS (SELECT 'job' AS kind, j.state AS label1, '' AS label2, count(*)::float8 AS n
        FROM jobs j WHERE j.id = ANY (ids) GROUP BY j.state
        UNION ALL
        SELECT 'attempt', coalesce(a.outcome, a.state), coalesce(a.class, 'none'), count(*)
        FROM attempts a WHERE a.job_id = ANY (ids) AND a.state <> 'running' GROUP BY 2, 3
        UNION ALL
        SELECT 'attempt_gpu_s', coalesce(a.outcome, a.state), coalesce(a.class, 'none'),
               coalesce(sum(extract(epoch FROM a.ended_at - a.started_at)), 0)::float8
        FROM attempts a WHERE a.job_id = ANY (ids) AND a.state <> 'running' GROUP BY 2, 3
        UNION ALL
        SELECT 'owner_gpu_s', j.owner,
               CASE WHEN a.outcome = 'failed' AND left(a.class, 4) = 'oom_' THEN 'oom' ELSE coalesce(a.outcome, a.state) END,
               coalesce(sum(extract(epoch FROM a.ended_at - a.started_at)), 0)::float8
        FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE a.job_id = ANY (ids) AND a.state <> 'running' GROUP BY 2, 3
        UNION ALL
        SELECT 'rung', a.rung, '', count(*) FROM attempts a WHERE a.job_id = ANY (ids) AND a.rung IS NOT NULL GROUP BY 2
        UNION ALL
        SELECT 'resumed', 'attempts', '', count(*) FROM attempts a WHERE a.job_id = ANY (ids) AND a.resumed_step IS NOT NULL
        UNION ALL
        SELECT 'resumed', 'steps', '', coalesce(sum(a.resumed_step), 0) FROM attempts a
        WHERE a.job_id = ANY (ids) AND a.resumed_step IS NOT NULL
        UNION ALL
        SELECT 'resumed', 'gpu_s', '', coalesce(sum(a.resumed_gpu_s), 0) FROM attempts a
        WHERE a.job_id = ANY (ids) AND a.resumed_step IS NOT NULL
        UNION ALL
        SELECT 'lease_wait_le', b::text, '', (SELECT count(*) FROM pw WHERE pw.w <= b) FROM unnest(p_bounds) b
        UNION ALL
        SELECT 'lease_wait', 'sum', '', coalesce(sum(pw.w), 0) FROM pw
        UNION ALL
        SELECT 'lease_wait', 'count', '', count(*) FROM pw)
  INSERT INTO metrics_pruned AS m (kind, label1, label2, n)
  SELECT c.kind, c.label1, c.label2, c.n FROM c WHERE c.n <> 0
  ON CONFLICT (kind, label1, label2) DO UPDATE SET n = m.n + excluded.n;
  DELETE FROM webhook_outbox w USING escalations e WHERE w.escalation_id = e.id AND e.job_id = ANY (ids);
  DELETE FROM webhook_outbox WHERE job_id = ANY (ids); -- the job webhook's rows (migration 018)
  DELETE FROM escalations WHERE job_id = ANY (ids);
  DELETE FROM event_log WHERE job_id = ANY (ids);
  DELETE FROM attempt_logs l USING attempts a WHERE l.attempt_id = a.id AND a.job_id = ANY (ids); -- migration 022
  DELETE FROM attempts WHERE job_id = ANY (ids);
  DELETE FROM jobs WHERE id = ANY (ids);
  RETURN cardinality(ids);
END $$;
