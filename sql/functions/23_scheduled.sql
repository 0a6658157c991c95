-- Jobs that start later (migration 025): a job submitted with a start time in the future
-- (rung_submit_run_after, 20_submit.sql) waits in the state 'scheduled', which no claim reads, until
-- rungd's scheduler (server/scheduler.c) queues it at that time, or someone starts it at once (POST
-- /v1/jobs/{id}/start). Cancel (21_cancel.sql) and priority changes (22_job_ops.sql) take it as they
-- take a queued job. Once queued it is ordered like any queued job, by (priority, created_at, id):
-- it has been in line since it was submitted, as a retried job keeps its place (created_at is not
-- moved: retention's walk, rung_prune, relies on it growing with the id).
--
-- Jobs that run after others (migration 033: jobs.after_ids, waits_for) wait in the same state: a job
-- with jobs left in waits_for is not queued at its start time; the success of the last job it waits
-- for queues it (rung_after_release, below), or leaves it for its start time when that is still
-- ahead. A job it waits for that failed or was cancelled holds it until it is retried and succeeds:
-- the job page names it; cancel the waiting job, or start it at once, to go on without it.

-- Jobs P_IDS as a sentence names them: "job 3", "jobs 3, 4"; NULL for none.
CREATE OR REPLACE FUNCTION rung_jobs_text(p_ids bigint[]) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN cardinality(p_ids) = 1 THEN 'job ' || p_ids[1]
              WHEN cardinality(p_ids) > 1 THEN 'jobs ' || array_to_string(p_ids, ', ') END
$$;

-- The sentence of a job's next_action while it waits for P_IDS: "waits for job 3 to succeed",
-- "waits for jobs 3, 4 to succeed".
CREATE OR REPLACE FUNCTION rung_after_text(p_ids bigint[]) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT 'waits for ' || rung_jobs_text(p_ids) || ' to succeed'
$$;

-- The first of the jobs P_AFTER that does not exist or, with P_OWNER, is not that owner's; NULL when
-- every one may be run after (a submit, 20_submit.sql, and rung_set_after, below).
CREATE OR REPLACE FUNCTION rung_after_unknown(p_after bigint[], p_owner text) RETURNS bigint LANGUAGE sql STABLE AS $$
  SELECT min(x) FROM unnest(p_after) x
  WHERE NOT EXISTS (SELECT 1 FROM jobs d WHERE d.id = x AND (p_owner IS NULL OR d.owner = p_owner))
$$;

-- Arms the jobs P_AFTER for a job that will run after them, and returns those it must wait for (not
-- succeeded yet; NULL for none): each is locked (in id order) and marked (has_dependents, which arms
-- jobs_after_release) before the states are read, so that a finish under way either commits first
-- (its success is read here) or, waiting for the lock, sees the new dependent when its trigger runs.
-- The lock is taken even on a job already marked (the UPDATE alone would pass it over). The caller
-- writes the result as the job's waits_for in the same transaction.
CREATE OR REPLACE FUNCTION rung_after_arm(p_after bigint[]) RETURNS bigint[] LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM jobs d WHERE d.id = ANY (p_after) ORDER BY d.id FOR NO KEY UPDATE;
  UPDATE jobs d SET has_dependents = true WHERE d.id = ANY (p_after) AND NOT d.has_dependents;
  RETURN nullif(ARRAY(SELECT d.id FROM jobs d WHERE d.id = ANY (p_after) AND d.state <> 'succeeded' ORDER BY d.id), '{}');
END $$;

-- Whether a scheduled job still waits for job P_JOB to succeed (jobs_waits_for): retention keeps
-- such a job, which the waiting one needs.
CREATE OR REPLACE FUNCTION rung_job_awaited(p_job bigint) RETURNS boolean LANGUAGE sql STABLE AS $$
  SELECT EXISTS (SELECT 1 FROM jobs w WHERE w.waits_for @> ARRAY[p_job] AND w.waits_for IS NOT NULL
                                         AND w.state = 'scheduled')
$$;

-- The trigger on a job's success that some job was submitted to run after (jobs.has_dependents):
-- it leaves the job out of each dependent's waits_for, under the dependent's row lock, whatever the
-- dependent's state (a cancelled one retried later then waits only for the rest). A scheduled one
-- left waiting for nothing is queued, with an event `dependencies_met` (scheduled -> queued, data
-- {"after", "last"}), unless its start time is still ahead: then the event keeps it scheduled and
-- the scheduler queues it at that time. No NOTIFY: the finish's reply says "dependents" (61, 62), and
-- rungd wakes the lease waiters of every replica after the commit (lease_announce). A trigger, not a
-- call in the two finish paths: the set-wise apply is one statement, whose snapshot may predate a
-- dependent submitted while it waited for the job's row lock; the trigger's statements take their
-- own. A submit that names the job locks and marks it first (20_submit.sql), so either the finish
-- sees the new dependent or the submit sees the success.
CREATE OR REPLACE FUNCTION rung_after_release() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  WITH w AS (SELECT d.id FROM jobs d WHERE d.waits_for @> ARRAY[NEW.id] AND d.waits_for IS NOT NULL
             ORDER BY d.id FOR NO KEY UPDATE),
  up AS (
    UPDATE jobs j SET
      waits_for = nullif(array_remove(j.waits_for, NEW.id), '{}'),
      state = CASE WHEN j.state = 'scheduled' AND j.waits_for = ARRAY[NEW.id]
                        AND (j.run_after IS NULL OR j.run_after <= now()) THEN 'queued' ELSE j.state END,
      next_action = CASE WHEN j.state <> 'scheduled' THEN j.next_action
                         WHEN j.waits_for <> ARRAY[NEW.id] THEN rung_after_text(array_remove(j.waits_for, NEW.id))
                         WHEN j.run_after > now() THEN NULL
                         ELSE 'job ' || NEW.id || ' succeeded, the last it ran after; waits for a GPU' END,
      updated_at = now()
    FROM w WHERE j.id = w.id
    RETURNING j.id, j.state, j.waits_for, j.after_ids, j.run_after)
  INSERT INTO event_log (job_id, kind, from_state, to_state, reason, data)
  SELECT up.id, 'dependencies_met', 'scheduled', up.state,
         'job ' || NEW.id || ' succeeded, the last of the jobs it runs after'
         || CASE WHEN up.state = 'scheduled' THEN '; it waits for its start time' ELSE '' END,
         jsonb_build_object('after', up.after_ids, 'last', NEW.id)
  FROM up WHERE up.waits_for IS NULL AND up.state IN ('queued', 'scheduled') ORDER BY up.id;
  RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER jobs_after_release AFTER UPDATE OF state ON jobs
FOR EACH ROW WHEN (NEW.has_dependents AND NEW.state = 'succeeded' AND OLD.state IS DISTINCT FROM NEW.state)
EXECUTE FUNCTION rung_after_release();

-- rung_start_due(max): the scheduled jobs whose start time has come, the earliest first, at most
-- P_MAX, each queued (next_action says why) with an event `start_time_reached` (scheduled -> queued,
-- data {"run_after"}), all in one statement. A job another transaction holds locked (another
-- replica's run of this, a cancel, a start, a priority change under way) is skipped (SKIP LOCKED):
-- that transaction or the next run takes care of it. Returns the jobs it queued with their start
-- times, in that order; rungd logs them and, when there are any, wakes the waiters after the commit
-- (lease_announce). Walks jobs_scheduled from its earliest entry and stops at the first start time
-- still ahead, so a run with nothing due reads one index entry; a job whose start time came while it
-- still waits for other jobs (migration 033) stays, and is passed over on that walk until they
-- succeed (its start time no longer holds it: the last success queues it).
CREATE OR REPLACE FUNCTION rung_start_due(p_max int) RETURNS TABLE (job_id bigint, run_after timestamptz)
LANGUAGE sql AS $$
  WITH due AS (
    SELECT d.id FROM jobs d
    WHERE d.state = 'scheduled' AND d.run_after <= now() AND d.waits_for IS NULL
    ORDER BY d.run_after LIMIT p_max
    FOR UPDATE SKIP LOCKED),
  up AS (
    UPDATE jobs u SET state = 'queued', updated_at = now(), next_action = 'queued at its start time; waits for a GPU'
    FROM due WHERE u.id = due.id AND u.state = 'scheduled' AND u.waits_for IS NULL
    RETURNING u.id, u.run_after),
  ev AS (
    INSERT INTO event_log (job_id, kind, from_state, to_state, reason, data)
    SELECT up.id, 'start_time_reached', 'scheduled', 'queued', 'its start time came',
           jsonb_build_object('run_after', up.run_after)
    FROM up ORDER BY up.run_after, up.id)
  SELECT up.id, up.run_after FROM up ORDER BY up.run_after, up.id
$$;

-- rung_start_now(job, by): a scheduled job queued at once, before its start time and without waiting
-- for the jobs it runs after (its waits_for is cleared; after_ids stays), under its row lock, with an
-- event `started_now` (scheduled -> queued, data {"run_after", "by", "waits_for"}). Returns {"status":
-- "ok", "job": JOB}; {"status": "conflict", "job": JOB} when the job is not scheduled (nothing
-- changes); NULL when there is no such job. rungd wakes the waiters after the commit.
CREATE OR REPLACE FUNCTION rung_start_now(p_job bigint, p_by text) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  j jobs;
  v_why text;
  v_waits bigint[];
BEGIN
  SELECT * INTO j FROM jobs WHERE id = p_job FOR UPDATE;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  IF j.state <> 'scheduled' THEN
    RETURN jsonb_build_object('status', 'conflict', 'job', rung_job_json(j));
  END IF;
  v_waits := j.waits_for;
  v_why := 'started now' || coalesce(' by ' || p_by, '')
           || coalesce(', without waiting for ' || rung_jobs_text(v_waits) || ' to succeed', ', before its start time');
  UPDATE jobs SET state = 'queued', waits_for = NULL, updated_at = now(), next_action = v_why || '; waits for a GPU'
  WHERE id = p_job RETURNING * INTO j;
  INSERT INTO event_log (job_id, kind, from_state, to_state, reason, data)
  VALUES (j.id, 'started_now', 'scheduled', 'queued', v_why,
          jsonb_build_object('run_after', j.run_after, 'by', p_by)
          || CASE WHEN v_waits IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('waits_for', v_waits) END);
  RETURN jsonb_build_object('status', 'ok', 'job', rung_job_json(j));
END $$;

-- rung_set_after(job, after, owner, by): the jobs a job not started yet (queued or scheduled) runs
-- after, set again (POST /v1/jobs/{id}/after, rungctl after): P_AFTER the new list (NULL or {}: none;
-- sorted and made distinct here). The jobs named are locked first, then the job (the order a finish's
-- release takes them in: the job it finishes, then its dependents), and armed as a submit arms them
-- (rung_after_arm). Each must exist and, with P_OWNER, be that
-- owner's ({"status": "after_unknown", "after": the first that is not}); none may be the job itself or
-- one that waits for it, directly or through others ({"status": "cycle", "after": that one}: both would
-- wait forever). The job is then 'scheduled' while some of them have not succeeded or its start time is
-- ahead, else 'queued', with an event `after_changed` (data {"from", "to", "waits_for", "by"}).
-- Returns {"status": "ok", "job": JOB}; {"status": "conflict", "job": JOB} when the job has started
-- or ended (nothing changes); NULL when there is no such job. rungd wakes the waiters after the commit.
CREATE OR REPLACE FUNCTION rung_set_after(p_job bigint, p_after bigint[], p_owner text, p_by text) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  j jobs;
  v_after bigint[] := nullif(ARRAY(SELECT DISTINCT x FROM unnest(p_after) x ORDER BY 1), '{}');
  v_waits bigint[];
  v_bad bigint;
  v_state text;
  v_why text;
BEGIN
  PERFORM 1 FROM jobs d WHERE d.id = ANY (v_after) AND d.id <> p_job ORDER BY d.id FOR NO KEY UPDATE;
  SELECT * INTO j FROM jobs WHERE id = p_job FOR UPDATE;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  IF j.state NOT IN ('queued', 'scheduled') THEN
    RETURN jsonb_build_object('status', 'conflict', 'job', rung_job_json(j));
  END IF;
  v_bad := rung_after_unknown(v_after, p_owner);
  IF v_bad IS NOT NULL THEN
    RETURN jsonb_build_object('status', 'after_unknown', 'after', v_bad);
  END IF;
  SELECT min(x) INTO v_bad FROM unnest(v_after) x WHERE x = p_job OR x = ANY (rung_jobs_waiting_on(p_job));
  IF v_bad IS NOT NULL THEN
    RETURN jsonb_build_object('status', 'cycle', 'after', v_bad);
  END IF;
  v_waits := rung_after_arm(v_after);
  v_state := CASE WHEN v_waits IS NOT NULL OR j.run_after > now() THEN 'scheduled' ELSE 'queued' END;
  v_why := 'runs after ' || coalesce(rung_jobs_text(v_after), 'no job') || ' now' || coalesce(' (set by ' || p_by || ')', '');
  INSERT INTO event_log (job_id, kind, from_state, to_state, reason, data)
  VALUES (j.id, 'after_changed', j.state, v_state, v_why,
          jsonb_build_object('from', j.after_ids, 'to', v_after, 'waits_for', v_waits, 'by', p_by));
  UPDATE jobs SET after_ids = v_after, waits_for = v_waits, state = v_state, updated_at = now(),
                  next_action = CASE WHEN v_waits IS NOT NULL THEN rung_after_text(v_waits)
                                     WHEN v_state = 'queued' AND j.state = 'scheduled' THEN v_why || '; waits for a GPU'
                                     WHEN v_state = 'scheduled' THEN NULL
                                     ELSE j.next_action END
  WHERE id = p_job RETURNING * INTO j;
  RETURN jsonb_build_object('status', 'ok', 'job', rung_job_json(j));
END $$;
