-- GPUs: an operator's release, the quarantine clock, health reports (POST /v1/gpus/{uuid}/health:
-- a passing report lifts a quarantine to `suspect` once the GPU has been quarantined for the
-- minimum time, and clears a suspect GPU with no env fault in its window to `ok`; a failing one
-- only records).

-- An operator releases a GPU: back to ok, earlier env faults no longer count.
CREATE OR REPLACE FUNCTION rung_gpu_release(p_uuid text) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  g gpus;
  old text;
BEGIN
  SELECT state INTO old FROM gpus WHERE uuid = p_uuid FOR UPDATE;
  IF NOT FOUND THEN RETURN NULL; END IF;
  UPDATE gpus SET state = 'ok', reason = NULL, released_at = now(), updated_at = now()
  WHERE uuid = p_uuid RETURNING * INTO g;
  INSERT INTO events (kind, from_state, to_state, reason, data)
  VALUES ('gpu_released', old, 'ok', 'released by an operator', jsonb_build_object('gpu_uuid', p_uuid));
  RETURN rung_gpu_json(g);
END $$;

-- Whoever quarantines a GPU (rung_finish_apply, the batch variant), the clock starts here.
CREATE OR REPLACE FUNCTION rung_gpu_quarantine_stamp() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.state = 'quarantined' AND OLD.state IS DISTINCT FROM 'quarantined' THEN
    NEW.quarantined_at := now();
  END IF;
  RETURN NEW;
END $$;

CREATE OR REPLACE TRIGGER gpus_quarantine_stamp BEFORE UPDATE OF state ON gpus
FOR EACH ROW EXECUTE FUNCTION rung_gpu_quarantine_stamp();

-- The GPU's env faults that still count: since its last release, each within the
-- env_fault_window_s of the job it happened to (3600 when unknown). Returns the count and the
-- time the newest of them leaves its window (NULL when none counts).
CREATE OR REPLACE FUNCTION rung_gpu_faults_in_window(p_uuid text, p_released timestamptz,
                                          OUT n bigint, OUT clears_at timestamptz)
LANGUAGE sql STABLE AS $$
  SELECT count(*), max(x.ends)
  FROM (SELECT f.at + make_interval(secs => coalesce((j.recovery->>'env_fault_window_s')::int, 3600)) AS ends
        FROM gpu_faults f LEFT JOIN jobs j ON j.id = f.job_id
        WHERE f.gpu_uuid = p_uuid AND f.at > coalesce(p_released, '-infinity')) x
  WHERE x.ends > now()
$$;

-- A health report on GPU p_uuid. p_token: the reporting worker token's id, which must be bound
-- to the GPU's worker (NULL: staff, no ownership check). p_min_s: --quarantine-min-s.
-- Returns {"status": "not_found"} (no such GPU, or not the caller's), or {"status": "ok",
-- "uuid", "state", "from_state", "next_check_ms"}: next_check_ms is how long until a report could
-- change the state (0: now; the rest of the minimum quarantine; until the newest env fault leaves
-- its window), or null when the GPU is ok and needs no checks.
CREATE OR REPLACE FUNCTION rung_gpu_health(p_uuid text, p_token bigint, p_passed boolean, p_detail text,
                                p_gpu_state jsonb, p_min_s int) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  g gpus;
  old text;
  fw record;
  next_ms bigint;
  why text;
BEGIN
  SELECT gp.* INTO g FROM gpus gp LEFT JOIN workers w ON w.id = gp.worker_id
  WHERE gp.uuid = p_uuid AND (p_token IS NULL OR w.token_id = p_token)
  FOR UPDATE OF gp;
  IF NOT FOUND THEN RETURN jsonb_build_object('status', 'not_found'); END IF;
  old := g.state;
  SELECT * INTO fw FROM rung_gpu_faults_in_window(g.uuid, g.released_at);
  IF p_passed AND g.state = 'quarantined'
     AND coalesce(g.quarantined_at, '-infinity') <= now() - make_interval(secs => p_min_s) THEN
    g.state := 'suspect';
    why := 'health check passed';
  ELSIF p_passed AND g.state = 'suspect' AND fw.n = 0 THEN
    g.state := 'ok';
    why := 'health check passed with no environment fault in the window';
  END IF;
  UPDATE gpus SET state = g.state, reason = coalesce(why, reason),
                  updated_at = CASE WHEN why IS NULL THEN updated_at ELSE now() END,
                  health_at = now(), health_passed = p_passed, health_detail = p_detail
  WHERE uuid = g.uuid RETURNING * INTO g;
  INSERT INTO events (kind, from_state, to_state, reason, data)
  VALUES ('gpu_health', old, g.state,
          CASE WHEN p_passed THEN 'health check passed' ELSE 'health check failed' END
            || CASE WHEN coalesce(p_detail, '') <> '' THEN ': ' || p_detail ELSE '' END,
          jsonb_build_object('gpu_uuid', g.uuid, 'worker_id', g.worker_id, 'passed', p_passed,
                             'detail', p_detail, 'gpu_state', p_gpu_state,
                             'by', CASE WHEN p_token IS NULL THEN 'staff' ELSE 'worker' END));
  IF old = 'quarantined' AND g.state = 'suspect' THEN
    INSERT INTO events (kind, from_state, to_state, reason, data)
    VALUES ('gpu_unquarantined', old, g.state, why,
            jsonb_build_object('gpu_uuid', g.uuid, 'quarantined_at', g.quarantined_at,
                               'env_faults_in_window', fw.n));
  ELSIF old = 'suspect' AND g.state = 'ok' THEN
    INSERT INTO events (kind, from_state, to_state, reason, data)
    VALUES ('gpu_cleared', old, g.state, why, jsonb_build_object('gpu_uuid', g.uuid));
  END IF;
  next_ms := CASE
    WHEN g.state = 'quarantined' THEN greatest(0, ceil(extract(epoch FROM
               coalesce(g.quarantined_at, now()) + make_interval(secs => p_min_s) - now()) * 1000))::bigint
    WHEN g.state = 'suspect' AND fw.clears_at IS NOT NULL THEN
      greatest(0, ceil(extract(epoch FROM fw.clears_at - now()) * 1000))::bigint
    WHEN g.state = 'suspect' THEN 0
    ELSE NULL END;
  RETURN jsonb_build_object('status', 'ok', 'uuid', g.uuid, 'state', g.state, 'from_state', old,
                            'next_check_ms', next_ms);
END $$;

-- Every worker pool in use, by name, as [POOL] (GET /v1/pools, rungctl pools, the GPUs page): the pools of
-- the workers in the fleet (rung_worker_in_fleet: live or drained), the pools they borrow from
-- (migration 028) and the pools of the jobs not finished. Per pool: "queued", "scheduled" and
-- "running" jobs; "workers" in the fleet whose pool it is, "gpus" not quarantined on its live workers
-- (as rung_pool_gpus counts them), "draining_gpus" on its drained ones, "borrowing_gpus" on live
-- workers of other pools that borrow from it (rung_pool_borrowing_gpus), "borrowed_by" the pools of
-- those workers, "borrows" the pools its own workers borrow from, and "max_gpu_mib", its largest usable
-- GPU (rung_pool_max_gpu_mib: a borrower's counted; 0: none). O(workers, GPUs, unfinished jobs): for
-- an operator's page, not a hot path.
CREATE OR REPLACE FUNCTION rung_pools_json() RETURNS jsonb LANGUAGE sql STABLE AS $$
  WITH jobs_by_pool AS (SELECT j.pool, count(*) FILTER (WHERE j.state = 'queued') AS queued,
                               count(*) FILTER (WHERE j.state = 'scheduled') AS scheduled,
                               count(*) FILTER (WHERE j.state = 'running') AS running
                        FROM jobs j WHERE j.state IN ('queued', 'scheduled', 'running') GROUP BY j.pool),
    fleet AS MATERIALIZED (SELECT w.id, w.pool, w.borrow, rung_worker_live(w.id) AS live FROM workers w
                           WHERE rung_worker_in_fleet(w.id)),
    gpus_by_pool AS (SELECT f.pool, count(DISTINCT f.id) AS workers,
                            count(g.uuid) FILTER (WHERE f.live AND g.state <> 'quarantined') AS gpus,
                            count(g.uuid) FILTER (WHERE NOT f.live AND g.state <> 'quarantined') AS draining
                     FROM fleet f LEFT JOIN gpus g ON g.worker_id = f.id GROUP BY f.pool),
    lent AS (SELECT b.pool, count(g.uuid) FILTER (WHERE f.live AND g.state <> 'quarantined') AS gpus,
                    jsonb_agg(DISTINCT f.pool) AS by_pools
             FROM fleet f CROSS JOIN LATERAL unnest(f.borrow) AS b(pool) LEFT JOIN gpus g ON g.worker_id = f.id
             WHERE b.pool <> f.pool GROUP BY b.pool),
    borrows AS (SELECT f.pool, jsonb_agg(DISTINCT b.pool) AS pools
                FROM fleet f CROSS JOIN LATERAL unnest(f.borrow) AS b(pool) GROUP BY f.pool),
    names AS (SELECT pool FROM jobs_by_pool UNION SELECT pool FROM fleet UNION SELECT pool FROM lent)
  SELECT coalesce(jsonb_agg(jsonb_build_object(
           'pool', n.pool, 'queued', coalesce(j.queued, 0), 'scheduled', coalesce(j.scheduled, 0),
           'running', coalesce(j.running, 0), 'workers', coalesce(g.workers, 0), 'gpus', coalesce(g.gpus, 0),
           'draining_gpus', coalesce(g.draining, 0), 'borrowing_gpus', coalesce(l.gpus, 0),
           'borrowed_by', coalesce(l.by_pools, '[]'), 'borrows', coalesce(b.pools, '[]'),
           'max_gpu_mib', rung_pool_max_gpu_mib(n.pool)) ORDER BY n.pool), '[]')
  FROM names n LEFT JOIN jobs_by_pool j ON j.pool = n.pool LEFT JOIN gpus_by_pool g ON g.pool = n.pool
       LEFT JOIN lent l ON l.pool = n.pool LEFT JOIN borrows b ON b.pool = n.pool
$$;
