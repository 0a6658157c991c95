-- Jobs that start later (migration 025): a job submitted with a start time in the future
-- (rung_submit_run_after, 20_submit.sql) waits in the state 'scheduled', which no claim reads, until
-- rungd's scheduler (server/scheduler.c) queues it at that time, or someone starts it at once (POST
-- /v1/jobs/{id}/start). Cancel (21_cancel.sql) and priority changes (22_job_ops.sql) take it as they
-- take a queued job. Once queued it is ordered like any queued job, by (priority, created_at, id):
-- it has been in line since it was submitted, as a retried job keeps its place (created_at is not
-- moved: retention's walk, rung_prune, relies on it growing with the id).

-- rung_start_due(max): the scheduled jobs whose start time has come, the earliest first, at most
-- P_MAX, each queued (next_action says why) with an event `start_time_reached` (scheduled -> queued,
-- data {"run_after"}), all in one statement. A job another transaction holds locked (another
-- replica's run of this, a cancel, a start, a priority change under way) is skipped (SKIP LOCKED):
-- that transaction or the next run takes care of it. Returns the jobs it queued with their start
-- times, in that order; rungd logs them and, when there are any, wakes the waiters after the commit
-- (lease_announce). Walks jobs_scheduled from its earliest entry and stops at the first start time
-- still ahead, so a run with nothing due reads one index entry.
CREATE OR REPLACE FUNCTION rung_start_due(p_max int) RETURNS TABLE (job_id bigint, run_after timestamptz)
LANGUAGE sql AS $$
  WITH due AS (
    SELECT d.id FROM jobs d
    WHERE d.state = 'scheduled' AND d.run_after <= now()
    ORDER BY d.run_after LIMIT p_max
    FOR UPDATE SKIP LOCKED),
  up AS (
    UPDATE jobs u SET state = 'queued', updated_at = now(), next_action = 'queued at its start time; waits for a GPU'
    FROM due WHERE u.id = due.id AND u.state = 'scheduled'
    RETURNING u.id, u.run_after),
  ev AS (
    INSERT INTO event_log (job_id, kind, from_state, to_state, reason, data)
    SELECT up.id, 'start_time_reached', 'scheduled', 'queued', 'its start time came',
           jsonb_build_object('run_after', up.run_after)
    FROM up ORDER BY up.run_after, up.id)
  SELECT up.id, up.run_after FROM up ORDER BY up.run_after, up.id
$$;

-- rung_start_now(job, by): a scheduled job queued at once, before its start time, under its row lock,
-- with an event `started_now` (scheduled -> queued, data {"run_after", "by"}). Returns {"status":
-- "ok", "job": JOB}; {"status": "conflict", "job": JOB} when the job is not scheduled (nothing
-- changes); NULL when there is no such job. rungd wakes the waiters after the commit.
CREATE OR REPLACE FUNCTION rung_start_now(p_job bigint, p_by text) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  j jobs;
  v_why text := 'started now' || coalesce(' by ' || p_by, '') || ', before its start time';
BEGIN
  SELECT * INTO j FROM jobs WHERE id = p_job FOR UPDATE;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  IF j.state <> 'scheduled' THEN
    RETURN jsonb_build_object('status', 'conflict', 'job', rung_job_json(j));
  END IF;
  UPDATE jobs SET state = 'queued', updated_at = now(), next_action = v_why || '; waits for a GPU'
  WHERE id = p_job RETURNING * INTO j;
  INSERT INTO event_log (job_id, kind, from_state, to_state, reason, data)
  VALUES (j.id, 'started_now', 'scheduled', 'queued', v_why, jsonb_build_object('run_after', j.run_after, 'by', p_by));
  RETURN jsonb_build_object('status', 'ok', 'job', rung_job_json(j));
END $$;
