-- Preemption (migration 029, rungd --preempt-after-s): a worker that borrows from other pools (028)
-- gives its GPU back to its own pool when that pool has a queued job the GPU could run and no idle GPU
-- of the pool takes it, and with --preempt-priority an urgent job stops a job of its pool of a worse
-- priority. rungd's preempt timer (server/preempt.c) calls rung_preempt_pass; the attempt's next
-- heartbeat answers cancel and preempt, the worker stops the trainer, and its finish queues the job
-- again unchanged, outside its budgets (server/api_attempts.c).

-- The advisory lock that makes one preemption pass at a time, across replicas: a second pass waits,
-- then sees the first one's marks (a job is preempted for once).
CREATE OR REPLACE FUNCTION rung_preempt_lock() RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
  SELECT 7240532::bigint
$$;

-- Whether a stop may be asked for now: the function files in place are this release's (or a later
-- one's), which schema_repeatables records. A rungd of a release before 029 that starts puts its own
-- files back, and with them a finish that reads a stop as a cancel (and an apply that records it as
-- failed): rung_preempt_pass makes no stop and a requeue is refused (503) until a rungd of this release
-- starts again.
CREATE OR REPLACE FUNCTION rung_stops_ready() RETURNS boolean LANGUAGE sql STABLE AS $$
  SELECT EXISTS (SELECT 1 FROM schema_repeatables r WHERE r.name = 'functions/44_preempt')
$$;

-- Marks at most P_LIMIT running attempts for preemption and returns them: [{"attempt_id", "job_id",
-- "number", "worker_id", "gpu_uuid", "pool", "for_job", "why"}]. A candidate is a running attempt, not
-- yet marked, whose job's cancel was not requested, on a GPU not quarantined of a live worker (online,
-- not drained: a drained one would not take the job it is stopped for), that has run at least P_AFTER_S
-- seconds (every stopped job gets that long; it also bounds how often one GPU can be stopped when the
-- job it was stopped for is then not taken there), and that is either
--   - "borrowed": of a job of another pool than its worker's, a worker of a pool some worker borrows
--     into: a stop for any queued job of the worker's own pool;
--   - "priority" (P_URGENT not NULL, rungd --preempt-priority): of a job of its worker's own pool whose
--     priority is above P_URGENT: a stop only for a queued job of that pool of priority P_URGENT or
--     below (urgent).
-- With P_URGENT, an urgent job is never a candidate, not even where it runs borrowed: a job stopped
-- is never urgent, so a stop never leads to another.
-- The pools weighed: those of a borrowing worker with a job queued, and with P_URGENT those with an
-- urgent job queued. For each, its first 64 queued jobs are weighed in claim order (owners at their limit
-- passed over, and with P_FAIR the fair share's order: rung_queue_head), each given, in this order:
--   - nothing, when its owner has no room left, when its memory floor is above every GPU of the pool
--     (rung_pool_max_gpu_mib), while a checkpoint hold keeps it for one worker (40_claim.sql), or when a stop was already made for it and that attempt still runs or
--     ended less than 5 minutes ago (its GPU went to another job: something this function does not
--     see blocks it);
--   - an idle GPU that may run it of a live worker that takes the pool's jobs (its own or a
--     borrower): the next claim takes it there, nothing is stopped;
--   - else, among the candidates of the pool it may stop whose GPU may run it: a borrowed attempt
--     first, the one that started last (the least work lost); else the attempt of the worst priority,
--     of those the one that started last: marked, with an event `preempt_requested` on its job. Its row is taken with SKIP
--     LOCKED: heartbeats and finishes lock attempts in id order, this pass in its own, so it never
--     waits on one (a row held now is passed over; the next pass sees it again).
-- "May run it" is the claim's rule: rung_job_allows (exclusions, memory floor), and not a GPU its
-- config failed on since its last retry (40_claim.sql). Nothing is marked while schema_repeatables
-- lacks this file: a rungd of a release before 029 put its own function files back.
-- An owner's room (tokens.max_running, and its limit in the pool: rung_owner_room_now) is spent as
-- jobs are given a GPU. Read without row locks,
-- under the advisory lock: a claim that races it at worst makes a stop that was not needed, and the
-- 5 minutes keep that from repeating. Not weighed: the lease's memory check of a job's first attempt
-- (server/lease.c), which may still send the job to a bigger GPU. Cost: one probe per pool of a
-- borrowing worker, and with P_URGENT two per pool with a job queued (every pass but those where a
-- stop may be due); then the queue's head;
-- the running attempts and the idle GPUs (O(running + GPUs)) only once a job passed the checks above
-- (docs/PERFORMANCE.md, round 18).
DROP FUNCTION IF EXISTS rung_preempt(int, int);   -- its first form, never released
CREATE OR REPLACE FUNCTION rung_preempt_pass(p_after_s int, p_limit int, p_fair boolean, p_urgent int) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  v_out jsonb := '[]';
  v_pool text;
  pools text[] := '{}';
  v_job bigint;
  head bigint[];
  failed_gpus text[];
  q jobs;
  room jsonb;
  capped text[];
  loaded boolean := false;
  -- the candidates, the one that started last first
  c_id bigint[]; c_job bigint[]; c_num int[]; c_worker bigint[]; c_gpu text[]; c_mem int[]; c_pool text[];
  c_prio int[];      -- the candidate's job's priority; NULL for a borrowed one
  c_taken boolean[];
  urgent boolean;    -- the weighed job may stop a job of its pool of a worse priority
  busy text[];
  -- the pool's idle GPUs, read when its first job needs them
  i_gpu text[]; i_worker bigint[]; i_mem int[];
  i_taken boolean[];
  idle_used text[] := '{}';
  i_pool text;
  left_in_pool int;
  pool_max int;
  k int;
  hit int;
  n int := 0;
BEGIN
  IF p_after_s < 0 OR p_limit <= 0 THEN
    RETURN v_out;
  END IF;
  -- the pools of the workers that borrow (workers_borrowing) that have a job queued: a probe of
  -- jobs_claim each, in its order (an EXISTS may be planned as a scan of the whole queue)
  FOR v_pool IN SELECT DISTINCT w.pool FROM workers w WHERE w.borrow <> '{}' ORDER BY w.pool LOOP
    PERFORM 1 FROM jobs c WHERE c.state = 'queued' AND c.pool = v_pool ORDER BY c.priority, c.created_at, c.id LIMIT 1;
    IF FOUND THEN
      pools := pools || v_pool;
    END IF;
  END LOOP;
  -- with P_URGENT, the other pools with an urgent job queued and a job running that it may stop: the
  -- pools of the queue walked through jobs_claim (one index probe per pool, not a scan of the queue),
  -- then a probe each for an urgent job, then the running attempts (attempts_one_running, each job
  -- read by its key: a join may walk the jobs' key range instead) for a job of a worse priority, so
  -- that the candidates and the idle GPUs are read only when some job could be stopped
  IF p_urgent IS NOT NULL THEN
    FOR v_pool IN
      WITH RECURSIVE qp(pool) AS (
        (SELECT c.pool FROM jobs c WHERE c.state = 'queued' ORDER BY c.pool LIMIT 1)
        UNION ALL
        SELECT (SELECT c.pool FROM jobs c WHERE c.state = 'queued' AND c.pool > qp.pool ORDER BY c.pool LIMIT 1)
        FROM qp WHERE qp.pool IS NOT NULL)
      SELECT qp.pool FROM qp WHERE qp.pool IS NOT NULL AND qp.pool <> ALL (pools)
    LOOP
      PERFORM 1 FROM jobs c WHERE c.state = 'queued' AND c.pool = v_pool AND c.priority <= p_urgent
      ORDER BY c.priority, c.created_at, c.id LIMIT 1;
      CONTINUE WHEN NOT FOUND;
      PERFORM 1 FROM attempts r WHERE r.state = 'running'
        AND (SELECT o.pool = v_pool AND o.priority > p_urgent FROM jobs o WHERE o.id = r.job_id)
      ORDER BY r.job_id LIMIT 1;
      IF FOUND THEN
        pools := pools || v_pool;
      END IF;
    END LOOP;
  END IF;
  IF cardinality(pools) = 0 THEN
    RETURN v_out;
  END IF;
  IF NOT rung_stops_ready() THEN   -- a pre-029 rungd's function files are in place
    RETURN v_out;
  END IF;
  PERFORM pg_advisory_xact_lock(rung_preempt_lock());
  room := rung_owner_room_now();
  FOREACH v_pool IN ARRAY pools LOOP
    capped := coalesce(rung_owners_capped_in(room, v_pool), '{}');
    pool_max := rung_pool_max_gpu_mib(v_pool);
    IF cardinality(capped) = 0 AND NOT p_fair THEN   -- claim order, jobs_claim
      SELECT coalesce(array_agg(c.id ORDER BY c.priority, c.created_at, c.id), '{}') INTO head
      FROM (SELECT c.id, c.priority, c.created_at FROM jobs c WHERE c.state = 'queued' AND c.pool = v_pool
            ORDER BY c.priority, c.created_at, c.id LIMIT 64) c;
    ELSE
      -- the claim's own order: owners at their limit passed over, a fair share (rungd --fair-share)
      -- placing each owner's jobs after its running ones
      head := rung_queue_head(capped, 64, CASE WHEN p_fair THEN rung_owners_running() END, v_pool);
    END IF;
    FOREACH v_job IN ARRAY head LOOP
      EXIT WHEN n >= p_limit;
      SELECT * INTO q FROM jobs j WHERE j.id = v_job AND j.state = 'queued';
      CONTINUE WHEN NOT FOUND OR NOT rung_room_open(room, q.owner, v_pool)
                    OR coalesce((q.constraints->>'min_gpu_memory_mib')::int, 0) > pool_max
                    -- held for its checkpoint's host (recovery/resume.h): it waits for that worker's
                    -- GPUs, or for the hold's end, not for a stop
                    OR rung_held_elsewhere(q.constraints, 0);
      CONTINUE WHEN EXISTS (SELECT 1 FROM attempts x WHERE x.preempt_for = q.id
                              AND (x.state = 'running' OR x.ended_at > now() - interval '5 minutes'));
      -- the GPUs the claim refuses it: those its config failed on since its last retry (40_claim.sql)
      failed_gpus := '{}';
      IF q.attempts_count > 0 THEN
        SELECT coalesce(array_agg(f.gpu_uuid), '{}') INTO failed_gpus FROM attempts f
        WHERE f.job_id = q.id AND f.outcome = 'failed' AND f.gpu_uuid IS NOT NULL
          AND f.number > rung_budget_from(q.recovery_state)
          AND f.config_hash = md5(coalesce(q.current_config, q.target_config)::text);
      END IF;
      IF NOT loaded THEN   -- the candidates and the busy GPUs, once a job may need them
        loaded := true;
        -- in the order they are taken: borrowed ones first, then the worst priority; the one that
        -- started last first
        SELECT coalesce(array_agg(x.id ORDER BY x.prio DESC NULLS FIRST, x.started_at DESC, x.id DESC), '{}'),
               array_agg(x.job_id ORDER BY x.prio DESC NULLS FIRST, x.started_at DESC, x.id DESC),
               array_agg(x.number ORDER BY x.prio DESC NULLS FIRST, x.started_at DESC, x.id DESC),
               array_agg(x.worker_id ORDER BY x.prio DESC NULLS FIRST, x.started_at DESC, x.id DESC),
               array_agg(x.gpu_uuid ORDER BY x.prio DESC NULLS FIRST, x.started_at DESC, x.id DESC),
               array_agg(x.mem ORDER BY x.prio DESC NULLS FIRST, x.started_at DESC, x.id DESC),
               array_agg(x.pool ORDER BY x.prio DESC NULLS FIRST, x.started_at DESC, x.id DESC),
               array_agg(x.prio ORDER BY x.prio DESC NULLS FIRST, x.started_at DESC, x.id DESC)
        INTO c_id, c_job, c_num, c_worker, c_gpu, c_mem, c_pool, c_prio
        FROM (SELECT a.id, a.job_id, a.number, a.worker_id, a.gpu_uuid, coalesce(g.memory_total_mib, 0) AS mem, w.pool,
                     a.started_at, CASE WHEN j.pool = w.pool THEN j.priority END AS prio
              FROM attempts a JOIN jobs j ON j.id = a.job_id JOIN workers w ON w.id = a.worker_id
              LEFT JOIN gpus g ON g.uuid = a.gpu_uuid
              WHERE a.state = 'running' AND a.preempted_at IS NULL AND w.pool = ANY (pools)
                -- with P_URGENT, any job of a worse priority than urgent, borrowed or not; an urgent
                -- job never, not even where it runs borrowed (else it would stop another job once
                -- queued again); without it, borrowed work only
                AND coalesce(j.priority > p_urgent, j.pool <> w.pool)
                AND NOT j.cancel_requested AND coalesce(g.state, 'ok') <> 'quarantined'
                AND rung_worker_live(w.id) AND a.started_at <= now() - make_interval(secs => p_after_s)) x;
        c_taken := array_fill(false, ARRAY[greatest(cardinality(c_id), 1)]);
        SELECT coalesce(array_agg(a.gpu_uuid), '{}') INTO busy FROM attempts a WHERE a.state = 'running' AND a.gpu_uuid IS NOT NULL;
      END IF;
      urgent := coalesce(q.priority <= p_urgent, false);
      -- no candidate of this pool left that it may stop: no job after it (none of a better priority)
      -- can get a GPU by a stop
      EXIT WHEN NOT EXISTS (SELECT 1 FROM generate_subscripts(c_id, 1) u(k)
                            WHERE c_pool[u.k] = v_pool AND NOT c_taken[u.k] AND (c_prio[u.k] IS NULL OR urgent));
      IF i_pool IS DISTINCT FROM v_pool THEN   -- GPUs that take the pool's jobs and run nothing
        i_pool := v_pool;
        SELECT coalesce(array_agg(f.uuid ORDER BY f.uuid), '{}'), array_agg(f.worker_id ORDER BY f.uuid),
               array_agg(f.memory_total_mib ORDER BY f.uuid)
        INTO i_gpu, i_worker, i_mem
        FROM (SELECT g.uuid, g.worker_id, g.memory_total_mib FROM gpus g
              WHERE g.state <> 'quarantined' AND g.uuid <> ALL (busy) OFFSET 0) f
        WHERE (SELECT rung_worker_takes(v_pool, w.pool, w.borrow) FROM workers w WHERE w.id = f.worker_id)
          AND rung_worker_live(f.worker_id);
        -- a GPU given to a job of an earlier pool this pass (a borrower's) stays given
        i_taken := ARRAY(SELECT u.g = ANY (idle_used) FROM unnest(i_gpu) u(g));
      END IF;
      hit := NULL;
      FOR k IN 1 .. cardinality(i_gpu) LOOP
        IF NOT i_taken[k] AND rung_job_allows(q.constraints, i_worker[k], i_gpu[k], i_mem[k])
           AND i_gpu[k] <> ALL (failed_gpus) THEN
          hit := k;
          EXIT;
        END IF;
      END LOOP;
      IF hit IS NOT NULL THEN
        i_taken[hit] := true;          -- the next claim runs it there: nothing is stopped
        idle_used := idle_used || i_gpu[hit];
      ELSE
        FOR k IN 1 .. cardinality(c_id) LOOP
          IF NOT c_taken[k] AND c_pool[k] = v_pool AND (c_prio[k] IS NULL OR urgent)
             AND rung_job_allows(q.constraints, c_worker[k], c_gpu[k], c_mem[k])
             AND c_gpu[k] <> ALL (failed_gpus) THEN
            hit := k;
            EXIT;
          END IF;
        END LOOP;
        CONTINUE WHEN hit IS NULL;
        c_taken[hit] := true;
        -- never wait on an attempt row: heartbeats and finishes lock theirs in id order, this pass in
        -- its own; one a statement holds now is passed over (the next pass sees it again)
        PERFORM 1 FROM attempts t WHERE t.id = c_id[hit] AND t.state = 'running' AND t.preempted_at IS NULL
        FOR UPDATE SKIP LOCKED;
        CONTINUE WHEN NOT FOUND;
        UPDATE attempts SET preempted_at = now(), preempt_for = q.id WHERE id = c_id[hit];
        INSERT INTO event_log (job_id, attempt_id, kind, reason, data)
        VALUES (c_job[hit], c_id[hit], 'preempt_requested',
                'attempt ' || c_num[hit] || ' is stopped: job ' || q.id || ' of pool ' || v_pool
                || CASE WHEN c_prio[hit] IS NULL THEN '' ELSE ', of priority ' || q.priority || ' (urgent: '
                        || p_urgent || ' or below; this job''s is ' || c_prio[hit] || '),' END
                || ' waits for its GPU; this job is queued again unchanged when it ends',
                jsonb_build_object('number', c_num[hit], 'worker_id', c_worker[hit], 'gpu_uuid', c_gpu[hit],
                                   'pool', v_pool, 'for_job', q.id,
                                   'why', CASE WHEN c_prio[hit] IS NULL THEN 'borrowed' ELSE 'priority' END));
        v_out := v_out || jsonb_build_array(jsonb_build_object(
          'attempt_id', c_id[hit], 'job_id', c_job[hit], 'number', c_num[hit], 'worker_id', c_worker[hit],
          'gpu_uuid', c_gpu[hit], 'pool', v_pool, 'for_job', q.id,
          'why', CASE WHEN c_prio[hit] IS NULL THEN 'borrowed' ELSE 'priority' END));
        n := n + 1;
      END IF;
      room := rung_room_take(room, q.owner, v_pool);
    END LOOP;
  END LOOP;
  RETURN v_out;
END $$;

-- The pass without urgent priorities (borrowed work only), as a rungd of the release before calls it
-- while replicas of two releases share the database.
CREATE OR REPLACE FUNCTION rung_preempt(p_after_s int, p_limit int, p_fair boolean) RETURNS jsonb LANGUAGE sql AS $$
  SELECT rung_preempt_pass(p_after_s, p_limit, p_fair, NULL)
$$;

-- Stops the running attempts P_IDS on request, as rung_preempt stops one (preempted_at; preempt_for
-- NULL: no job waits for it), those of jobs whose cancel was requested left to end cancelled: the
-- worker stops each at its next heartbeat and the finish queues its job again unchanged, outside its
-- budgets. Their rows are locked in id order, as heartbeats and finishes lock theirs, and no job row
-- is: a finish locks the attempt, then the job, and this must not take them the other way round. An
-- event requeue_requested {"number", "worker_id", "gpu_uuid", "by", "note"} each (P_DRAINED: asked
-- by a drain, said in its reason). Returns how many it marked (one already marked is not counted).
CREATE OR REPLACE FUNCTION rung_requeue_attempts(p_ids bigint[], p_by text, p_note text, p_drained boolean)
RETURNS int LANGUAGE plpgsql AS $$
DECLARE
  n int;
BEGIN
  WITH l AS MATERIALIZED (
    SELECT t.id FROM attempts t
    WHERE t.id = ANY (p_ids) AND t.state = 'running' AND t.preempted_at IS NULL
      AND NOT (SELECT o.cancel_requested FROM jobs o WHERE o.id = t.job_id)
    ORDER BY t.id FOR UPDATE),
  m AS (
    UPDATE attempts t SET preempted_at = now()
    FROM l WHERE t.id = l.id AND t.state = 'running' AND t.preempted_at IS NULL
    RETURNING t.id, t.job_id, t.number, t.worker_id, t.gpu_uuid),
  e AS (
    INSERT INTO event_log (job_id, attempt_id, kind, reason, data)
    SELECT m.job_id, m.id, 'requeue_requested',
           'attempt ' || m.number || ' is stopped on request' || coalesce(' by ' || p_by, '')
           || CASE WHEN p_drained THEN ' (its worker is drained)' ELSE '' END
           || '; the job is queued again unchanged when it ends' || coalesce(': ' || p_note, ''),
           jsonb_build_object('number', m.number, 'worker_id', m.worker_id, 'gpu_uuid', m.gpu_uuid, 'by', p_by,
                              'note', p_note)
    FROM m ORDER BY m.id
    RETURNING 1)
  SELECT count(*) INTO n FROM e;
  RETURN n;
END $$;

-- Requeue on request (POST /v1/jobs/{id}/requeue): rung_requeue(job, by, note) stops the job's
-- running attempt (rung_requeue_attempts; found through attempts_one_running), so that it resumes
-- from its checkpoint (on another GPU when this one is drained). A second request while the stop is
-- under way is ok and writes nothing. Returns {"status": "ok"|"conflict", "job"} (conflict: the job
-- is not running, or its cancel was requested), {"status": "unavailable"} while rung_stops_ready is
-- false, NULL when there is no such job.
CREATE OR REPLACE FUNCTION rung_requeue(p_job bigint, p_by text, p_note text) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  j jobs;
  n int;
BEGIN
  IF NOT rung_stops_ready() THEN
    RETURN CASE WHEN EXISTS (SELECT 1 FROM jobs o WHERE o.id = p_job) THEN jsonb_build_object('status', 'unavailable') END;
  END IF;
  n := rung_requeue_attempts(ARRAY(SELECT t.id FROM attempts t WHERE t.job_id = p_job AND t.state = 'running'),
                             p_by, p_note, false);
  SELECT * INTO j FROM jobs WHERE id = p_job;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  IF n = 0 AND (j.state <> 'running' OR j.cancel_requested
                OR NOT EXISTS (SELECT 1 FROM attempts t WHERE t.job_id = p_job AND t.state = 'running'
                                 AND t.preempted_at IS NOT NULL)) THEN
    RETURN jsonb_build_object('status', 'conflict', 'job', rung_job_json(j));
  END IF;
  RETURN jsonb_build_object('status', 'ok', 'job', rung_job_json(j));
END $$;

DROP FUNCTION IF EXISTS rung_worker_requeue(bigint, text, text);   -- never released: rung_requeue_attempts

-- A drain with "requeue" (POST /v1/workers/{id}/drain): the worker is drained (rung_worker_drain,
-- 31_drain.sql) and its running attempts stopped (rung_requeue_attempts; O(running attempts)), after every claim under way
-- has ended and before any other starts: the lock a change of an owner's limit takes
-- (rung_owner_limits_lock: every claim holds it shared for its transaction), so no claim that read
-- the worker online leases it an attempt this misses. Returns rung_worker_drain's {"changed",
-- "worker"} with "requeued": how many it stopped; {"unavailable": true} while rung_stops_ready is
-- false (nothing changed); NULL when there is no such worker.
CREATE OR REPLACE FUNCTION rung_worker_drain_requeue(p_worker bigint, p_note text, p_by text) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  d jsonb;
BEGIN
  IF NOT rung_stops_ready() THEN
    RETURN CASE WHEN EXISTS (SELECT 1 FROM workers w WHERE w.id = p_worker) THEN jsonb_build_object('unavailable', true) END;
  END IF;
  PERFORM pg_advisory_xact_lock(rung_owner_limits_lock());
  d := rung_worker_drain(p_worker, true, p_note, p_by);
  IF d IS NULL THEN
    RETURN NULL;
  END IF;
  RETURN d || jsonb_build_object('requeued', rung_requeue_attempts(
    ARRAY(SELECT t.id FROM attempts t WHERE t.worker_id = p_worker AND t.state = 'running'), p_by, p_note, true));
END $$;
