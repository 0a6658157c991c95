-- Workers drained from the control plane: an operator takes a host out of service (maintenance, a
-- bad PSU, a driver upgrade) without a shell on it. A draining worker's GPUs get no new lease (the
-- claim answers 'none' to a worker that is not online), its running attempts go on to their end,
-- a queued job's placement counts its GPUs apart (draining_gpus), and the fleet's largest GPU
-- still counts them (rung_worker_in_fleet): a job may wait for a host in maintenance rather than
-- fail for want of a bigger card. The state outlives the worker's restarts (rung_register keeps
-- it) until the worker is resumed.

-- A worker as GET /v1/workers lists it: the version it registered with (null: it sent none), its pool, the
-- pools it borrows from (migration 028), its GPUs, running attempts and, while draining, the drain record {"at", "by", "note"}.
CREATE OR REPLACE FUNCTION rung_worker_json(w workers) RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object('id', w.id, 'name', w.name, 'host', w.host, 'state', w.state, 'version', w.version, 'pool', w.pool,
    'borrow', to_jsonb(w.borrow), 'created_at', w.created_at, 'last_seen_at', w.last_seen_at, 'drain', w.drain,
    'gpus', coalesce((SELECT jsonb_agg(g.uuid ORDER BY g.idx) FROM gpus g WHERE g.worker_id = w.id), '[]'),
    'running_attempts', (SELECT count(*) FROM attempts a WHERE a.worker_id = w.id AND a.state = 'running'))
$$;

-- rung_worker_drain(worker, drain, note, by): P_DRAIN true drains the worker (state 'draining',
-- drain = {"at", "by", "note"}, a fleet event worker_drained), false resumes it (state 'online',
-- drain NULL, an event worker_resumed). Repeating either is a no-op. Returns {"changed": bool,
-- "worker": WORKER}, or NULL when there is no such worker. A drain also ends the checkpoint holds
-- for the worker (recovery/resume.h): those jobs may run elsewhere at once. rungd wakes the waiters after a resume
-- commits (lease_announce): the worker's parked long-polls may now take work.
CREATE OR REPLACE FUNCTION rung_worker_drain(p_worker bigint, p_drain boolean, p_note text, p_by text)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  w workers;
  v_changed boolean := false;
  v_was text;
  v_why text;
  v_json jsonb;
BEGIN
  IF p_drain THEN
    -- the queued jobs held for its checkpoints (recovery/resume.h), locked before the worker's row and
    -- waited for: a claim round locks jobs (SKIP LOCKED, never waiting) before workers, so one that
    -- holds such a job now is let finish (a lease then drops the hold) instead of keeping it past the drain
    PERFORM 1 FROM jobs h
    WHERE h.state = 'queued' AND h.constraints ? 'hold' AND (h.constraints->'hold'->>'worker_id')::bigint = p_worker
    ORDER BY h.id FOR UPDATE;
  END IF;
  SELECT * INTO w FROM workers WHERE id = p_worker FOR UPDATE;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  v_was := w.state;
  v_why := CASE WHEN p_drain THEN 'drained' ELSE 'resumed' END || coalesce(' by ' || p_by, '')
           || coalesce(': ' || p_note, '');
  IF p_drain AND w.state <> 'draining' THEN
    UPDATE workers SET state = 'draining', drain = jsonb_build_object('at', now(), 'by', p_by, 'note', p_note)
    WHERE id = p_worker RETURNING * INTO w;
    v_changed := true;
    -- the queued jobs held for its checkpoints may run elsewhere now: those locked above, and (SKIP
    -- LOCKED: this transaction holds the worker's row now, which a claim round may be waiting for) one
    -- held since by a finish that read the worker online, unless a round holds it
    UPDATE jobs SET constraints = constraints - 'hold'
    WHERE id IN (SELECT h.id FROM jobs h
                 WHERE h.state = 'queued' AND h.constraints ? 'hold'
                   AND (h.constraints->'hold'->>'worker_id')::bigint = p_worker
                 FOR UPDATE SKIP LOCKED);
  ELSIF NOT p_drain AND w.state = 'draining' THEN
    UPDATE workers SET state = 'online', drain = NULL WHERE id = p_worker RETURNING * INTO w;
    v_changed := true;
  END IF;
  v_json := rung_worker_json(w);
  IF v_changed THEN
    INSERT INTO events (kind, from_state, to_state, reason, data)
    VALUES (CASE WHEN p_drain THEN 'worker_drained' ELSE 'worker_resumed' END,
            v_was, w.state, v_why,
            jsonb_build_object('worker_id', w.id, 'worker', w.name, 'by', p_by, 'note', p_note,
                               'running_attempts', v_json->'running_attempts'));
  END IF;
  RETURN jsonb_build_object('changed', v_changed, 'worker', v_json);
END $$;
