-- Cancel: a job not started yet (queued, or scheduled: migration 025) -> cancelled now; running ->
-- cancel_requested; finished jobs unchanged. Returns JOB, or NULL when there is no such job.
CREATE OR REPLACE FUNCTION rung_cancel(p_job bigint) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  j jobs;
  v_from text;
BEGIN
  SELECT * INTO j FROM jobs WHERE id = p_job FOR UPDATE;
  IF NOT FOUND THEN RETURN NULL; END IF;
  IF j.state IN ('queued', 'scheduled') THEN
    v_from := j.state;
    UPDATE jobs SET state = 'cancelled', cancel_requested = true, finished_at = now(),
                    updated_at = now(), next_action = NULL,
                    result = jsonb_build_object('class', 'cancelled', 'reason', 'cancelled while ' || v_from)
    WHERE id = p_job RETURNING * INTO j;
    INSERT INTO events (job_id, kind, from_state, to_state, reason)
    VALUES (j.id, 'cancelled', v_from, 'cancelled', 'cancelled while ' || v_from);
  ELSIF j.state = 'running' AND NOT j.cancel_requested THEN
    UPDATE jobs SET cancel_requested = true, updated_at = now(),
                    next_action = 'the worker stops the trainer at its next heartbeat'
    WHERE id = p_job RETURNING * INTO j;
    INSERT INTO events (job_id, kind, from_state, to_state, reason)
    VALUES (j.id, 'cancel_requested', 'running', 'running', 'cancel requested while running');
  END IF;
  RETURN rung_job_json(j);
END $$;

-- The jobs that wait for job P_JOB (to succeed, or as their after_when says: migration 036), directly or through other waiting jobs (migration 033:
-- each step a probe of jobs_waits_for), in id order; {} for none. A chain cannot loop: a job runs only
-- after jobs that existed when it was submitted.
CREATE OR REPLACE FUNCTION rung_jobs_waiting_on(p_job bigint) RETURNS bigint[] LANGUAGE sql STABLE AS $$
  WITH RECURSIVE w(id) AS (
    SELECT d.id FROM jobs d WHERE d.waits_for @> ARRAY[p_job] AND d.waits_for IS NOT NULL
    UNION
    SELECT d.id FROM w JOIN jobs d ON d.waits_for @> ARRAY[w.id] AND d.waits_for IS NOT NULL)
  SELECT coalesce(array_agg(w.id ORDER BY w.id), '{}') FROM w
$$;

-- Cancel many (POST /v1/jobs/cancel): the jobs matching P_FILTER {"state", "owner"?, "labels"?, "kind"?,
-- "pool"?, "after"?}: in its state ('queued': not started yet, i.e. queued or scheduled; 'scheduled': only those
-- waiting for their start time or for other jobs; 'running'; 'active': all three) with that owner, every one of those
-- labels, that kind and that pool (migration 026) and waiting for job "after" (however they wait), directly or
-- through others (migration 033, rung_jobs_waiting_on; a key absent: any), oldest first, at most P_MAX,
-- each through rung_cancel (its row lock, transition and event, as one cancel would); a running job
-- already told to stop is not counted again. P_DRY: only list them. Returns {"ids": [the jobs
-- cancelled or told to stop, or that would be], "more": whether more match}. One jsonb filter, so
-- that the next filter needs no new signature (why signatures are not changed in place:
-- 30_register.sql).
CREATE OR REPLACE FUNCTION rung_cancel_where(p_filter jsonb, p_max int, p_dry boolean) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  v_state text := coalesce(p_filter->>'state', 'queued');
  v_owner text := p_filter->>'owner';
  v_labels jsonb := CASE WHEN jsonb_typeof(p_filter->'labels') = 'object' THEN p_filter->'labels' END;
  v_kind text := p_filter->>'kind';
  v_pool text := p_filter->>'pool';
  v_waiting bigint[] := CASE WHEN p_filter ? 'after' THEN rung_jobs_waiting_on((p_filter->>'after')::bigint) END;
  states text[] := CASE v_state WHEN 'active' THEN ARRAY['queued', 'scheduled', 'running']
                                WHEN 'queued' THEN ARRAY['queued', 'scheduled'] ELSE ARRAY[v_state] END;
  cand bigint[];
  done bigint[] := '{}';
  v_job bigint;
  st text;
  told boolean;
BEGIN
  SELECT coalesce(array_agg(x.id ORDER BY x.id), '{}') INTO cand FROM (
    SELECT j.id FROM jobs j
    WHERE j.state = ANY (states) AND NOT (j.state = 'running' AND j.cancel_requested)
      AND (v_owner IS NULL OR j.owner = v_owner) AND (v_kind IS NULL OR j.kind = v_kind)
      AND (v_pool IS NULL OR j.pool = v_pool) AND (v_waiting IS NULL OR j.id = ANY (v_waiting))
      AND (v_labels IS NULL OR (j.labels @> v_labels AND j.labels <> '{}'::jsonb)) -- jobs_labels' predicate
    ORDER BY j.id LIMIT p_max + 1) x;
  IF p_dry THEN
    RETURN jsonb_build_object('ids', to_jsonb(cand[1:p_max]), 'more', cardinality(cand) > p_max);
  END IF;
  -- every one locked first, in id order: a cancel's trigger locks the jobs that run after it
  -- (migration 036), so taking them one at a time between those could deadlock with a finish whose
  -- trigger locks the same dependents (a sweep cancelled while one of its jobs ends, with a --then job)
  PERFORM 1 FROM jobs j WHERE j.id = ANY (cand[1:p_max]) ORDER BY j.id FOR UPDATE;
  FOREACH v_job IN ARRAY cand[1:p_max] LOOP
    -- read again under the row lock: since the list was read it may have started (a job asked for
    -- as queued is not stopped), ended, or been cancelled by another call
    SELECT j.state, j.cancel_requested INTO st, told FROM jobs j WHERE j.id = v_job FOR UPDATE;
    CONTINUE WHEN NOT FOUND OR NOT (st = ANY (states)) OR (st = 'running' AND told);
    PERFORM rung_cancel(v_job);
    done := done || v_job;
  END LOOP;
  RETURN jsonb_build_object('ids', to_jsonb(done), 'more', cardinality(cand) > p_max);
END $$;

-- The name and signature of the release before migration 026, for its rungd during a rollout.
CREATE OR REPLACE FUNCTION rung_cancel_matching(p_state text, p_owner text, p_labels jsonb, p_kind text, p_max int,
                                                p_dry boolean) RETURNS jsonb LANGUAGE sql AS $$
  SELECT rung_cancel_where(jsonb_strip_nulls(jsonb_build_object('state', p_state, 'owner', p_owner, 'labels', p_labels,
                                                                'kind', p_kind)), p_max, p_dry)
$$;
