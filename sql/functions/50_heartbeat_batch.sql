-- Heartbeats of many attempts in one statement: p is [{"i", "id", "token", "phase", "step",
-- "total", "mem"}] with distinct ids, in ascending id order. Each is fenced (id, token, state running)
-- by a primary-key probe. A heartbeat extends the lease in Postgres only when the stored expiry is closer
-- than two thirds of a lease period, or when it is the attempt's first (and only then stores its progress):
-- the others are answered after the fence check and write nothing (migration 015; the reaper still sees an
-- expiry at least a third of a lease away). The rows it renews are locked in array order, so concurrent batches cannot deadlock. A worker's
-- last_seen_at is touched at most once a second, and not when another statement holds that worker row.
-- A batch with no lease due (its writes are progress alone) commits without waiting for its WAL flush (CTE s).
-- plpgsql, not sql: a session plans the statement once (plancache), where an sql function re-planned its
-- body at every call (0.6-0.7 ms a heartbeat, most of its time at W=1).
-- Rows: (i, cancel, preempt) for each item whose fence held, written or not; a missing row means 409.
-- cancel: the job's cancel was requested; preempt: the attempt was marked for preemption (migration
-- 029, rung_preempt). rungd answers "cancel" for either, so that a worker of the release before stops it too.
CREATE OR REPLACE FUNCTION rung_heartbeats(p jsonb, p_lease_s int)
RETURNS TABLE (i int, cancel boolean, preempt boolean) LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH x AS (
    SELECT * FROM jsonb_to_recordset(p) AS x(i int, id bigint, token text, phase text, step int,
                                              total int, mem int)),
  f AS MATERIALIZED (
    -- the fence: one primary-key probe per item (OFFSET 0: planned alone), `IS TRUE` so that no plan
    -- reads every running attempt through attempts_one_running; nothing is locked yet
    SELECT x.i, x.token, t.id, t.job_id, t.worker_id, x.phase, x.step, x.total, x.mem,
           t.preempted_at IS NOT NULL AS preempt,
           -- an attempt's first heartbeat writes too: its progress and memory are then on record (the web
           -- UI's memory chart, the API) however short the attempt
           (t.lease_expires_at < now() + make_interval(secs => p_lease_s * 2.0 / 3)
            OR t.last_heartbeat_at IS NULL) AS renew,
           t.lease_expires_at < now() + make_interval(secs => p_lease_s * 2.0 / 3) AS due
    FROM x CROSS JOIN LATERAL (SELECT t.id, t.job_id, t.worker_id, t.lease_expires_at, t.last_heartbeat_at,
                                      t.preempted_at
                               FROM attempts t
                               WHERE t.id = x.id AND t.token = x.token AND (t.state = 'running') IS TRUE
                               OFFSET 0) t),
  l AS MATERIALIZED (
    -- only a lease whose stored expiry is closer than two thirds of a lease period, or that never had a
    -- heartbeat, is extended (and its progress stored): locked in array order (rungd sends ids in ascending order), fenced again
    SELECT t.id, f.i, f.phase, f.step, f.total, f.mem
    FROM f CROSS JOIN LATERAL (SELECT t.id FROM attempts t
                               WHERE t.id = f.id AND t.token = f.token
                                 AND (t.state = 'running') IS TRUE
                               OFFSET 0 FOR UPDATE) t
    WHERE f.renew),
  a AS (
    UPDATE attempts t SET lease_expires_at = now() + make_interval(secs => p_lease_s),
      last_heartbeat_at = now(), phase = coalesce(l.phase, t.phase), step = coalesce(l.step, t.step),
      total_steps = coalesce(l.total, t.total_steps), memory_used_mib = coalesce(l.mem, t.memory_used_mib)
    -- locked and running (l); `id = ANY`: updated by primary key whatever l's row estimate
    FROM l WHERE t.id = l.id AND t.id = ANY (ARRAY(SELECT l.id FROM l))
    RETURNING l.i, t.job_id, t.preempted_at IS NOT NULL AS preempt),
  w AS (
    UPDATE workers SET last_seen_at = now()
    WHERE id IN (SELECT k.id FROM workers k WHERE k.id IN (SELECT f.worker_id FROM f)
                   AND k.last_seen_at < now() - interval '1 second'
                 ORDER BY k.id FOR UPDATE SKIP LOCKED)),
  ok AS (
    -- renewed, or fenced and far enough from its expiry to be answered without a write
    SELECT a.i, a.job_id, a.preempt FROM a
    UNION ALL
    SELECT f.i, f.job_id, f.preempt FROM f WHERE NOT f.renew),
  s AS MATERIALIZED (
    -- a batch whose writes are progress alone (first heartbeats of leases not yet due, last_seen_at)
    -- commits without waiting for its WAL flush: nothing is answered from them, the next commit (the
    -- finish at the latest) flushes them, and a crash that lost one leaves last_heartbeat_at NULL, so
    -- that attempt's next heartbeat writes again. Any lease due for renewal keeps the commit synchronous.
    SELECT set_config('synchronous_commit', 'off', true) AS v WHERE NOT EXISTS (SELECT 1 FROM f WHERE f.due))
  SELECT ok.i, j.cancel_requested, ok.preempt
  FROM ok CROSS JOIN LATERAL (SELECT j.cancel_requested FROM jobs j WHERE j.id = ok.job_id OFFSET 0) j
  WHERE (SELECT count(*) FROM s) >= 0;
END $$;

-- The release before's name and rows (i, cancel_requested), a rungd of that release still calls it
-- during a rolling upgrade: it does not tell a preempted attempt to stop (that rungd would end its job
-- cancelled: README, Upgrading a fleet).
CREATE OR REPLACE FUNCTION rung_heartbeat_batch(p jsonb, p_lease_s int)
RETURNS TABLE (i int, cancel boolean) LANGUAGE sql AS $$
  SELECT h.i, h.cancel FROM rung_heartbeats(p, p_lease_s) h
$$;
