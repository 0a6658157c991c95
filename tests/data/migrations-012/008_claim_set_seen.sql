-- The claim round (004's rung_claim_batch) starts its attempts set-wise: the loop over the waiters
-- only checks and chooses (worker, GPU, eligibility, exactly as before), then one statement moves
-- every chosen job to running, inserts their attempts and their `leased` events, instead of
-- rung_claim_start running three statements per lease. The LEASE rows leave the config out and
-- return it as text beside them (rungd splices it into the reply, server/lease.c), so Postgres no
-- longer copies each ~3 KB config through three jsonb values per lease.
--
-- A worker's last_seen_at is written at most once a second: a claim round or a heartbeat batch
-- rewrote the worker row (a new row version and its WAL) for every GPU of every call, so a host
-- with 8 GPUs rewrote it 8 times per heartbeat round. An offline worker still comes back online at
-- once. last_seen_at is shown (GET /v1/workers), never used to judge liveness (leases are).

DROP FUNCTION rung_claim_batch(jsonb, int);

-- p is [{"i", "worker", "gpu", "before", "fresh"}], served in array order, as 004 documents.
-- Rows: (i, status "ok" | "none" | "no_worker" | "no_gpu", and for "ok" the attempt id, job id,
-- attempt number, token, LEASE without config and heartbeat_ms, and the config as text).
CREATE FUNCTION rung_claim_batch(p jsonb, p_lease_s int)
RETURNS TABLE (i int, status text, attempt_id bigint, job_id bigint, number int, token text, lease jsonb,
               config text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  e jsonb;
  r jsonb;
  fresh boolean;
  wid bigint;
  gpu text;
  w workers;
  g gpus;
  ids bigint[];
  cons jsonb[];
  taken boolean[];
  ncand int;
  full_scan boolean;
  remaining int;
  first_free int := 1;
  k int;
  chosen int;
  -- the leases to start, one entry per chosen waiter
  c_i int[] := '{}';
  c_job bigint[] := '{}';
  c_worker bigint[] := '{}';
  c_gpu text[] := '{}';
  c_before jsonb[] := '{}';
BEGIN
  SELECT array_agg(x.id ORDER BY x.priority, x.created_at, x.id),
         array_agg(x.constraints ORDER BY x.priority, x.created_at, x.id)
  INTO ids, cons
  FROM (SELECT c.id, c.priority, c.created_at, c.constraints FROM jobs c WHERE c.state = 'queued'
        ORDER BY c.priority, c.created_at, c.id
        LIMIT greatest(jsonb_array_length(p), 1) FOR UPDATE SKIP LOCKED) x;
  ncand := coalesce(array_length(ids, 1), 0);
  full_scan := ncand >= jsonb_array_length(p);
  remaining := ncand;
  taken := array_fill(false, ARRAY[greatest(ncand, 1)]);
  FOR e IN SELECT x FROM jsonb_array_elements(p) x LOOP
    fresh := coalesce((e->>'fresh')::boolean, true);
    IF NOT fresh AND remaining = 0 AND NOT full_scan THEN
      EXIT; -- nothing left to claim, and (fresh items first) only checked waiters remain
    END IF;
    wid := (e->>'worker')::bigint;
    gpu := e->>'gpu';
    r := NULL;
    UPDATE workers SET last_seen_at = now(),
                       state = CASE WHEN state = 'offline' THEN 'online' ELSE state END
    WHERE id = wid AND (state = 'offline' OR last_seen_at < now() - interval '1 second')
    RETURNING * INTO w;
    IF NOT FOUND THEN
      SELECT * INTO w FROM workers WHERE id = wid;
    END IF;
    IF NOT FOUND THEN
      r := jsonb_build_object('status', 'no_worker');
    ELSE
      SELECT * INTO g FROM gpus WHERE uuid = gpu;
      IF NOT FOUND OR g.worker_id IS DISTINCT FROM wid THEN
        r := jsonb_build_object('status', 'no_gpu');
      ELSIF g.state = 'quarantined' OR w.state <> 'online' THEN
        r := jsonb_build_object('status', 'none');
      END IF;
    END IF;
    IF r IS NULL THEN
      chosen := NULL;
      WHILE first_free <= ncand AND taken[first_free] LOOP
        first_free := first_free + 1;
      END LOOP;
      k := first_free;
      WHILE k <= ncand LOOP
        IF NOT taken[k] AND rung_claim_eligible(ids[k], cons[k], wid, gpu, g.memory_total_mib) THEN
          chosen := k;
          EXIT;
        END IF;
        k := k + 1;
      END LOOP;
      IF chosen IS NOT NULL THEN
        taken[chosen] := true;
        remaining := remaining - 1;
        c_i := c_i || (e->>'i')::int;
        c_job := c_job || ids[chosen];
        c_worker := c_worker || wid;
        c_gpu := c_gpu || gpu;
        c_before := c_before || CASE WHEN jsonb_typeof(e->'before') = 'object' THEN e->'before' END;
        CONTINUE; -- started below, with the others
      ELSIF full_scan THEN
        r := rung_claim(wid, gpu, p_lease_s,
                        CASE WHEN jsonb_typeof(e->'before') = 'object' THEN e->'before' END);
      ELSE
        r := jsonb_build_object('status', 'none');
      END IF;
    END IF;
    IF fresh OR r->>'status' <> 'none' THEN
      i := (e->>'i')::int;
      status := r->>'status';
      lease := r->'lease';
      attempt_id := (lease->>'attempt_id')::bigint;
      job_id := (lease->>'job_id')::bigint;
      number := (lease->>'number')::int;
      token := lease->>'token';
      config := (lease->'config')::text;
      lease := lease - 'config';
      RETURN NEXT;
    END IF;
  END LOOP;
  IF array_length(c_i, 1) IS NULL THEN
    RETURN;
  END IF;
  -- rung_claim_start for every chosen waiter at once; each job is locked by the scan above and
  -- still queued, so every one of them starts.
  RETURN QUERY
  WITH c AS MATERIALIZED (
    SELECT * FROM unnest(c_i, c_job, c_worker, c_gpu, c_before) AS c(i, job_id, worker_id, gpu, before)),
  j AS (
    UPDATE jobs SET state = 'running', attempts_count = attempts_count + 1, updated_at = now(),
                    next_action = NULL
    FROM c WHERE jobs.id = c.job_id AND jobs.state = 'queued'
    RETURNING jobs.id, jobs.attempts_count, jobs.current_config, coalesce(jobs.current_config, jobs.target_config) AS cfg),
  a AS (
    INSERT INTO attempts (job_id, number, worker_id, gpu_uuid, config, config_hash, token,
                          lease_expires_at, gpu_before, phase)
    SELECT j.id, j.attempts_count, c.worker_id, c.gpu, j.current_config, md5(j.cfg::text),
           replace(gen_random_uuid()::text, '-', '') || replace(gen_random_uuid()::text, '-', ''),
           now() + make_interval(secs => p_lease_s), c.before, 'start'
    FROM c JOIN j ON j.id = c.job_id ORDER BY j.id
    RETURNING attempts.id, attempts.job_id, attempts.number, attempts.worker_id, attempts.gpu_uuid,
              attempts.config_hash, attempts.token),
  ev AS (
    INSERT INTO events (job_id, attempt_id, kind, from_state, to_state, reason, data)
    SELECT a.job_id, a.id, 'leased', 'queued', 'running', 'attempt ' || a.number || ' started',
           jsonb_build_object('number', a.number, 'worker_id', a.worker_id, 'gpu_uuid', a.gpu_uuid,
                              'config_hash', a.config_hash)
    FROM a ORDER BY a.id)
  SELECT c.i, 'ok'::text, a.id, a.job_id, a.number, a.token,
         jsonb_build_object('attempt_id', a.id, 'job_id', a.job_id, 'number', a.number, 'token', a.token,
                            'lease_seconds', p_lease_s),
         j.cfg::text
  FROM c JOIN a ON a.job_id = c.job_id JOIN j ON j.id = c.job_id;
END $$;

-- Heartbeats of many attempts (004), touching each worker's last_seen_at at most once a second.
CREATE OR REPLACE FUNCTION rung_heartbeat_batch(p jsonb, p_lease_s int)
RETURNS TABLE (i int, cancel boolean) LANGUAGE sql AS $$
  WITH x AS (
    SELECT * FROM jsonb_to_recordset(p) AS x(i int, id bigint, token text, phase text, step int,
                                              total int, mem int)),
  l AS MATERIALIZED (
    SELECT t.id, x.i, x.phase, x.step, x.total, x.mem FROM attempts t JOIN x ON x.id = t.id
    WHERE t.token = x.token AND t.state = 'running'
    ORDER BY t.id FOR UPDATE OF t),
  a AS (
    UPDATE attempts t SET lease_expires_at = now() + make_interval(secs => p_lease_s),
      last_heartbeat_at = now(), phase = coalesce(l.phase, t.phase), step = coalesce(l.step, t.step),
      total_steps = coalesce(l.total, t.total_steps), memory_used_mib = coalesce(l.mem, t.memory_used_mib)
    FROM l WHERE t.id = l.id AND t.state = 'running'
    RETURNING l.i, t.job_id, t.worker_id),
  w AS (
    UPDATE workers SET last_seen_at = now()
    WHERE id IN (SELECT k.id FROM workers k WHERE k.id IN (SELECT worker_id FROM a)
                   AND k.last_seen_at < now() - interval '1 second'
                 ORDER BY k.id FOR UPDATE SKIP LOCKED))
  SELECT a.i, j.cancel_requested FROM a JOIN jobs j ON j.id = a.job_id
$$;
