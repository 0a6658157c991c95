-- Heartbeats of many attempts in one statement: p is [{"i", "id", "token", "phase", "step",
-- "total", "mem"}] with distinct ids, in ascending id order. Each is a fenced update (id, token,
-- state running) that extends the lease; each row is found by primary key and locked in array
-- order, so concurrent batches cannot deadlock. A worker's last_seen_at is touched at most once a
-- second, and not when another statement holds that worker row (it is being touched already).
-- Rows: (i, cancel_requested) for each item whose fence held; a missing row means 409.
CREATE OR REPLACE FUNCTION rung_heartbeat_batch(p jsonb, p_lease_s int)
RETURNS TABLE (i int, cancel boolean) LANGUAGE sql AS $$
  WITH x AS (
    SELECT * FROM jsonb_to_recordset(p) AS x(i int, id bigint, token text, phase text, step int,
                                              total int, mem int)),
  l AS MATERIALIZED (
    -- one primary-key probe per item (OFFSET 0: planned alone), locked in array order (rungd
    -- sends ids in ascending order); the fence is checked before the lock, so a stale call locks
    -- nothing, and written `IS TRUE` so that no plan reads every running attempt through
    -- attempts_one_running instead
    SELECT t.id, x.i, x.phase, x.step, x.total, x.mem
    FROM x CROSS JOIN LATERAL (SELECT t.id FROM attempts t
                               WHERE t.id = x.id AND t.token = x.token AND (t.state = 'running') IS TRUE
                               OFFSET 0 FOR UPDATE) t),
  a AS (
    UPDATE attempts t SET lease_expires_at = now() + make_interval(secs => p_lease_s),
      last_heartbeat_at = now(), phase = coalesce(l.phase, t.phase), step = coalesce(l.step, t.step),
      total_steps = coalesce(l.total, t.total_steps), memory_used_mib = coalesce(l.mem, t.memory_used_mib)
    -- locked and running (l); `id = ANY`: updated by primary key whatever l's row estimate
    FROM l WHERE t.id = l.id AND t.id = ANY (ARRAY(SELECT l.id FROM l))
    RETURNING l.i, t.job_id, t.worker_id),
  w AS (
    UPDATE workers SET last_seen_at = now()
    WHERE id IN (SELECT k.id FROM workers k WHERE k.id IN (SELECT worker_id FROM a)
                   AND k.last_seen_at < now() - interval '1 second'
                 ORDER BY k.id FOR UPDATE SKIP LOCKED))
  SELECT a.i, j.cancel_requested
  FROM a CROSS JOIN LATERAL (SELECT j.cancel_requested FROM jobs j WHERE j.id = a.job_id OFFSET 0) j
$$;
