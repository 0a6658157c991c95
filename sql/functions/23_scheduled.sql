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
-- Its after_when (migration 036) says which endings release it: NULL, success (above); 'ended', any
-- ending (succeeded, failed, cancelled); 'failed', a failure or a cancel, and then a success of one of
-- them cancels it, since it would never start (rung_after_release).

-- Jobs P_IDS as a sentence names them: "job 3", "jobs 3, 4"; past 32 (a job may run after a whole
-- sweep of 256) the first 32 and how many more: "jobs 3, 4, ..., 34 and 220 more"; NULL for none.
CREATE OR REPLACE FUNCTION rung_jobs_text(p_ids bigint[]) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN cardinality(p_ids) = 1 THEN 'job ' || p_ids[1]
              WHEN cardinality(p_ids) BETWEEN 2 AND 32 THEN 'jobs ' || array_to_string(p_ids, ', ')
              WHEN cardinality(p_ids) > 32 THEN 'jobs ' || array_to_string(p_ids[1:32], ', ') || ' and '
                                                || (cardinality(p_ids) - 32) || ' more' END
$$;

-- The sentence of a job's next_action while it waits for P_IDS: "waits for job 3 to succeed",
-- "waits for jobs 3, 4 to succeed".
CREATE OR REPLACE FUNCTION rung_after_text(p_ids bigint[]) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT 'waits for ' || rung_jobs_text(p_ids) || ' to succeed'
$$;

-- The sentence of a job's next_action while it waits for P_IDS with after_when P_WHEN (migration 036):
-- "waits for job 3 to succeed" (NULL), "... to end" ('ended'), "... to fail or be cancelled" ('failed').
CREATE OR REPLACE FUNCTION rung_after_wait_text(p_ids bigint[], p_when text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT 'waits for ' || rung_jobs_text(p_ids) || CASE p_when WHEN 'ended' THEN ' to end'
                                                               WHEN 'failed' THEN ' to fail or be cancelled'
                                                               ELSE ' to succeed' END
$$;

-- Whether a job that ended in state P_STATE releases a job that runs after it with after_when P_WHEN
-- (migration 036; NULL: succeeded): the one place that rule is written.
CREATE OR REPLACE FUNCTION rung_after_met(p_when text, p_state text) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE p_when WHEN 'ended' THEN p_state IN ('succeeded', 'failed', 'cancelled')
                     WHEN 'failed' THEN p_state IN ('failed', 'cancelled')
                     ELSE p_state = 'succeeded' END
$$;

-- The jobs of P_AFTER a job with after_when P_WHEN must still wait for (NULL for none): those whose
-- state does not release it (rung_after_met), in id order. One that succeeded is never waited for:
-- with 'failed' it can release nothing more, and a submit or a change refuses it first
-- (rung_after_never); a retry, asked for by a person, goes on without it.
CREATE OR REPLACE FUNCTION rung_after_pending(p_after bigint[], p_when text) RETURNS bigint[] LANGUAGE sql STABLE AS $$
  SELECT nullif(ARRAY(SELECT d.id FROM jobs d WHERE d.id = ANY (p_after) AND d.state <> 'succeeded'
                                                AND NOT rung_after_met(p_when, d.state) ORDER BY d.id), '{}')
$$;

-- The first of the jobs P_AFTER that has succeeded when P_WHEN is 'failed' (a job that runs only after
-- failures would never start: a submit and a change refuse it); NULL otherwise.
CREATE OR REPLACE FUNCTION rung_after_never(p_after bigint[], p_when text) RETURNS bigint LANGUAGE sql STABLE AS $$
  SELECT min(d.id) FROM jobs d WHERE p_when = 'failed' AND d.id = ANY (p_after) AND d.state = 'succeeded'
$$;

-- The first of the jobs P_AFTER that does not exist or, with P_OWNER, is not that owner's; NULL when
-- every one may be run after (a submit, 20_submit.sql, and rung_set_after, below).
CREATE OR REPLACE FUNCTION rung_after_unknown(p_after bigint[], p_owner text) RETURNS bigint LANGUAGE sql STABLE AS $$
  SELECT min(x) FROM unnest(p_after) x
  WHERE NOT EXISTS (SELECT 1 FROM jobs d WHERE d.id = x AND (p_owner IS NULL OR d.owner = p_owner))
$$;

-- Arms the jobs P_AFTER for a job that will run after them, and returns those it must wait for (not
-- succeeded yet; NULL for none; rung_after_arm_when: those that have not released it yet): each is locked (in id order) and marked (has_dependents, which arms
-- jobs_after_release) before the states are read, so that a finish under way either commits first
-- (its success is read here) or, waiting for the lock, sees the new dependent when its trigger runs.
-- The lock is taken even on a job already marked (the UPDATE alone would pass it over). The caller
-- writes the result as the job's waits_for in the same transaction.
-- rung_after_arm_when: the same for a job with after_when P_WHEN (migration 036): returns those it must
-- still wait for (rung_after_pending). rung_after_arm, the release before's, is its wrapper.
CREATE OR REPLACE FUNCTION rung_after_arm_when(p_after bigint[], p_when text) RETURNS bigint[] LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM jobs d WHERE d.id = ANY (p_after) ORDER BY d.id FOR NO KEY UPDATE;
  UPDATE jobs d SET has_dependents = true WHERE d.id = ANY (p_after) AND NOT d.has_dependents;
  RETURN rung_after_pending(p_after, p_when);
END $$;

CREATE OR REPLACE FUNCTION rung_after_arm(p_after bigint[]) RETURNS bigint[] LANGUAGE sql AS $$
  SELECT rung_after_arm_when(p_after, NULL)
$$;

-- Whether a scheduled job still waits for job P_JOB (jobs_waits_for; to succeed, or to end as its
-- after_when says, migration 036): retention keeps
-- such a job, which the waiting one needs.
CREATE OR REPLACE FUNCTION rung_job_awaited(p_job bigint) RETURNS boolean LANGUAGE sql STABLE AS $$
  SELECT EXISTS (SELECT 1 FROM jobs w WHERE w.waits_for @> ARRAY[p_job] AND w.waits_for IS NOT NULL
                                         AND w.state = 'scheduled')
$$;

-- The trigger on the ending (succeeded, failed, cancelled) of a job that some job was submitted to run
-- after (jobs.has_dependents): it leaves the job out of the waits_for of each dependent that this
-- ending releases (rung_after_met: a success, any ending with after_when 'ended', a failure or a
-- cancel with 'failed'; migration 036), under the dependent's row lock, whatever the dependent's
-- state (a cancelled one retried later then waits only for the rest). A scheduled one left waiting
-- for nothing is queued, with an event `dependencies_met` (scheduled -> queued, data {"after",
-- "last", "ended": the state the last one ended in}), unless its start time is still ahead: then the
-- event keeps it scheduled and the scheduler queues it at that time. On a success, a scheduled
-- dependent with after_when 'failed' that waits for the job would never start: it is cancelled, with
-- an event `cancelled` (data {"after_when", "succeeded"}); its own dependents' triggers run in turn. No NOTIFY: the finish's reply says "dependents" (61, 62), and
-- rungd wakes the lease waiters of every replica after the commit (lease_announce). A trigger, not a
-- call in the two finish paths: the set-wise apply is one statement, whose snapshot may predate a
-- dependent submitted while it waited for the job's row lock; the trigger's statements take their
-- own. A submit that names the job locks and marks it first (20_submit.sql), so either the finish
-- sees the new dependent or the submit sees the success.
CREATE OR REPLACE FUNCTION rung_after_release() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  v_ended text := 'job ' || NEW.id || CASE NEW.state WHEN 'cancelled' THEN ' was cancelled' ELSE ' ' || NEW.state END;
BEGIN
  WITH w AS (SELECT d.id FROM jobs d WHERE d.waits_for @> ARRAY[NEW.id] AND d.waits_for IS NOT NULL
                                         AND rung_after_met(d.after_when, NEW.state)
             ORDER BY d.id FOR NO KEY UPDATE),
  up AS (
    UPDATE jobs j SET
      waits_for = nullif(array_remove(j.waits_for, NEW.id), '{}'),
      state = CASE WHEN j.state = 'scheduled' AND j.waits_for = ARRAY[NEW.id]
                        AND (j.run_after IS NULL OR j.run_after <= now()) THEN 'queued' ELSE j.state END,
      next_action = CASE WHEN j.state <> 'scheduled' THEN j.next_action
                         WHEN j.waits_for <> ARRAY[NEW.id] THEN rung_after_wait_text(array_remove(j.waits_for, NEW.id), j.after_when)
                         WHEN j.run_after > now() THEN NULL
                         ELSE v_ended || ', the last it ran after; waits for a GPU' END,
      updated_at = now()
    FROM w WHERE j.id = w.id
    RETURNING j.id, j.state, j.waits_for, j.after_ids, j.run_after)
  INSERT INTO event_log (job_id, kind, from_state, to_state, reason, data)
  SELECT up.id, 'dependencies_met', 'scheduled', up.state,
         v_ended || ', the last of the jobs it runs after'
         || CASE WHEN up.state = 'scheduled' THEN '; it waits for its start time' ELSE '' END,
         jsonb_build_object('after', up.after_ids, 'last', NEW.id, 'ended', NEW.state)
  FROM up WHERE up.waits_for IS NULL AND up.state IN ('queued', 'scheduled') ORDER BY up.id;
  IF NEW.state = 'succeeded' THEN
    -- after_when 'failed': this success means it would never start
    -- locked first, whatever their state, in a statement of its own: the next one's snapshot then sees
    -- a change committed while this one waited for a lock (a cancelled one retried just now, scheduled
    -- again to wait for this job, is cancelled here; with the lock and the state read in one statement
    -- it would be read as it was, cancelled, and left waiting for a success that has come)
    PERFORM 1 FROM jobs d WHERE d.waits_for @> ARRAY[NEW.id] AND d.waits_for IS NOT NULL AND d.after_when = 'failed'
    ORDER BY d.id FOR NO KEY UPDATE;
    WITH up AS (
      UPDATE jobs j SET state = 'cancelled', cancel_requested = true, finished_at = now(), updated_at = now(),
                        next_action = NULL,
                        result = jsonb_build_object('class', 'cancelled', 'reason',
                                   v_ended || ': this job was to run only if it failed or was cancelled')
      WHERE j.waits_for @> ARRAY[NEW.id] AND j.waits_for IS NOT NULL AND j.after_when = 'failed' AND j.state = 'scheduled'
      RETURNING j.id)
    INSERT INTO event_log (job_id, kind, from_state, to_state, reason, data)
    SELECT up.id, 'cancelled', 'scheduled', 'cancelled',
           v_ended || ': this job was to run only if it failed or was cancelled',
           jsonb_build_object('after_when', 'failed', 'succeeded', NEW.id)
    FROM up ORDER BY up.id;
  END IF;
  RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER jobs_after_release AFTER UPDATE OF state ON jobs
FOR EACH ROW WHEN (NEW.has_dependents AND NEW.state IN ('succeeded', 'failed', 'cancelled')
                   AND OLD.state IS DISTINCT FROM NEW.state)
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
-- release it (its start time no longer holds it: the last release, a success or the ending its
-- after_when asks for, queues it).
CREATE OR REPLACE FUNCTION rung_start_due(p_max int) RETURNS TABLE (job_id bigint, run_after timestamptz)
LANGUAGE sql AS $$
  WITH due AS (
    SELECT d.id FROM jobs d
    WHERE d.state = 'scheduled' AND d.run_after <= now() AND d.waits_for IS NULL
      -- a start deadline passed too (migration 039): left to rung_start_deadline_due, never queued late
      AND (d.start_by IS NULL OR d.start_by > now() OR d.attempts_count > 0)
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

-- rung_start_deadline_due(max): the jobs whose start deadline (migration 039, jobs.start_by) has
-- passed before they started (queued or scheduled, no attempt yet), the earliest first, at most
-- P_MAX, each cancelled as a cancel would (cancelled, finished, its result saying why) with an event
-- `start_deadline_passed` (data {"start_by"}); the jobs that run after them are released or held by
-- the trigger, as after any cancel. Walks jobs_start_by, whose entries are only such jobs, so a run
-- with nothing due reads one index entry. A job another transaction holds (a claim starting it now)
-- is skipped: the claim either starts it (the deadline is then spent) or the next run sees it. rungd
-- runs it with rung_start_due in one statement (sql/start_due.sql), and rung_start_due never queues a
-- job whose deadline has passed.
-- Returns the jobs it cancelled with their deadlines; rungd logs them and, when there are any, wakes
-- the waiters after the commit (a dependent may have been queued).
CREATE OR REPLACE FUNCTION rung_start_deadline_due(p_max int) RETURNS TABLE (job_id bigint, start_by timestamptz)
LANGUAGE sql AS $$
  WITH pick AS (
    SELECT d.id FROM jobs d
    WHERE d.start_by <= now() AND d.start_by IS NOT NULL AND d.state IN ('queued', 'scheduled') AND d.attempts_count = 0
    ORDER BY d.start_by LIMIT p_max),
  -- locked in id order, as a cancel of many does (21_cancel.sql): the release trigger then locks their
  -- dependents, and two passes or a pass and a finish take rows in one order
  due AS (
    SELECT d.id, d.state FROM jobs d JOIN pick ON pick.id = d.id
    WHERE d.start_by <= now() AND d.state IN ('queued', 'scheduled') AND d.attempts_count = 0
    ORDER BY d.id FOR UPDATE OF d SKIP LOCKED),
  up AS (
    UPDATE jobs u SET state = 'cancelled', cancel_requested = true, finished_at = now(), updated_at = now(),
                      next_action = NULL,
                      result = jsonb_build_object('class', 'cancelled', 'reason',
                                 'not started by ' || to_char(u.start_by AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
                                 || ', its start deadline: cancelled while ' || u.state)
    FROM due WHERE u.id = due.id AND u.state IN ('queued', 'scheduled') AND u.attempts_count = 0
    RETURNING u.id, u.start_by, due.state AS was),
  ev AS (
    INSERT INTO event_log (job_id, kind, from_state, to_state, reason, data)
    SELECT up.id, 'start_deadline_passed', up.was, 'cancelled', 'its start deadline passed before it started',
           jsonb_build_object('start_by', up.start_by)
    FROM up ORDER BY up.start_by, up.id)
  SELECT up.id, up.start_by FROM up ORDER BY up.start_by, up.id
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
           || coalesce(', without waiting for ' || substr(rung_after_wait_text(v_waits, j.after_when), 11), ', before its start time');
  UPDATE jobs SET state = 'queued', waits_for = NULL, updated_at = now(), next_action = v_why || '; waits for a GPU'
  WHERE id = p_job RETURNING * INTO j;
  INSERT INTO event_log (job_id, kind, from_state, to_state, reason, data)
  VALUES (j.id, 'started_now', 'scheduled', 'queued', v_why,
          jsonb_build_object('run_after', j.run_after, 'by', p_by)
          || CASE WHEN v_waits IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('waits_for', v_waits) END);
  RETURN jsonb_build_object('status', 'ok', 'job', rung_job_json(j));
END $$;

-- rung_set_after_when(job, after, when, owner, by): the jobs a job not started yet (queued or scheduled)
-- runs after, set again (POST /v1/jobs/{id}/after, rungctl after): P_AFTER the new list (NULL or {}: none;
-- sorted and made distinct here), P_WHEN its after_when (migration 036: 'succeeded', 'ended' or
-- 'failed'; NULL keeps the job's; none is kept without jobs). With 'failed', one of them that already
-- succeeded is refused ({"status": "after_never", "after": it}: the job would never start). The jobs named are locked first, then the job (the order a finish's
-- release takes them in: the job it finishes, then its dependents), and armed as a submit arms them
-- (rung_after_arm). Each must exist and, with P_OWNER, be that
-- owner's ({"status": "after_unknown", "after": the first that is not}); none may be the job itself or
-- one that waits for it, directly or through others ({"status": "cycle", "after": that one}: both would
-- wait forever). The job is then 'scheduled' while some of them have not released it (rung_after_pending)
-- or its start time is ahead, else 'queued', with an event `after_changed` (data {"from", "to", "when",
-- "waits_for", "by"}).
-- Returns {"status": "ok", "job": JOB}; {"status": "conflict", "job": JOB} when the job has started
-- or ended (nothing changes); NULL when there is no such job. rungd wakes the waiters after the commit.
CREATE OR REPLACE FUNCTION rung_set_after_when(p_job bigint, p_after bigint[], p_when text, p_owner text, p_by text)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  j jobs;
  v_after bigint[] := nullif(ARRAY(SELECT DISTINCT x FROM unnest(p_after) x ORDER BY 1), '{}');
  v_when text;
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
  v_when := CASE WHEN v_after IS NULL THEN NULL
                 WHEN p_when IS NULL THEN j.after_when
                 ELSE nullif(p_when, 'succeeded') END;
  v_bad := rung_after_never(v_after, v_when);
  IF v_bad IS NOT NULL THEN
    RETURN jsonb_build_object('status', 'after_never', 'after', v_bad);
  END IF;
  v_waits := rung_after_arm_when(v_after, v_when);
  v_state := CASE WHEN v_waits IS NOT NULL OR j.run_after > now() THEN 'scheduled' ELSE 'queued' END;
  v_why := 'runs after ' || coalesce(rung_jobs_text(v_after), 'no job')
           || CASE v_when WHEN 'ended' THEN ' (once they end)' WHEN 'failed' THEN ' (only if they fail or are cancelled)'
                          ELSE '' END
           || ' now' || coalesce(' (set by ' || p_by || ')', '');
  INSERT INTO event_log (job_id, kind, from_state, to_state, reason, data)
  VALUES (j.id, 'after_changed', j.state, v_state, v_why,
          jsonb_build_object('from', j.after_ids, 'to', v_after,
                             'when', CASE WHEN v_after IS NULL THEN NULL ELSE coalesce(v_when, 'succeeded') END,
                             'waits_for', v_waits, 'by', p_by));
  UPDATE jobs SET after_ids = v_after, after_when = v_when, waits_for = v_waits, state = v_state, updated_at = now(),
                  next_action = CASE WHEN v_waits IS NOT NULL THEN rung_after_wait_text(v_waits, v_when)
                                     WHEN v_state = 'queued' AND j.state = 'scheduled' THEN v_why || '; waits for a GPU'
                                     WHEN v_state = 'scheduled' THEN NULL
                                     ELSE j.next_action END
  WHERE id = p_job RETURNING * INTO j;
  RETURN jsonb_build_object('status', 'ok', 'job', rung_job_json(j));
END $$;

-- rung_set_after, the release before's: the same, keeping the job's after_when (migration 036).
CREATE OR REPLACE FUNCTION rung_set_after(p_job bigint, p_after bigint[], p_owner text, p_by text) RETURNS jsonb
LANGUAGE sql AS $$
  SELECT rung_set_after_when(p_job, p_after, NULL, p_owner, p_by)
$$;
