-- Coalesced statements: rungd gathers many HTTP calls of one kind that arrive close together and
-- sends them as one statement (one round trip, one transaction, one commit). Each function keeps
-- the per-item semantics of its single-item counterpart in 001_init.sql (fences, eligibility,
-- idempotency) and returns one row per item, keyed by the item's index `i` in the input array.

-- Whether queued job p_job (constraints p_cons) may run on GPU p_gpu (p_mem MiB) of worker
-- p_worker: every per-job rule of rung_claim's candidate scan (exclusions, minimum memory, never a
-- config identical to one that failed on this GPU).
CREATE OR REPLACE FUNCTION rung_claim_eligible(p_job bigint, p_cons jsonb, p_worker bigint, p_gpu text,
                                               p_mem int) RETURNS boolean LANGUAGE sql STABLE AS $$
  SELECT NOT coalesce(p_cons->'exclude_gpus' ? p_gpu, false)
     AND NOT coalesce(p_cons->'exclude_workers' @> to_jsonb(p_worker), false)
     AND NOT coalesce(p_cons->'exclude_workers' ? p_worker::text, false)
     AND coalesce((p_cons->>'min_gpu_memory_mib')::int, 0) <= p_mem
     AND NOT EXISTS (SELECT 1 FROM attempts f JOIN jobs c ON c.id = f.job_id
                     WHERE f.job_id = p_job AND f.gpu_uuid = p_gpu AND f.outcome = 'failed'
                       AND f.config_hash = md5(c.current_config::text))
$$;

-- Start an attempt of queued job p_job (locked by the caller) on the GPU: rung_claim's tail.
-- Returns {"status": "ok", "lease"}, or {"status": "none"} when the job is no longer queued.
CREATE OR REPLACE FUNCTION rung_claim_start(p_job bigint, p_worker bigint, p_gpu text, p_lease_s int,
                                            p_gpu_before jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  j jobs;
  a attempts;
BEGIN
  UPDATE jobs SET state = 'running', attempts_count = attempts_count + 1, updated_at = now(),
                  next_action = NULL
  WHERE id = p_job AND state = 'queued'
  RETURNING * INTO j;
  IF NOT FOUND THEN RETURN jsonb_build_object('status', 'none'); END IF;
  INSERT INTO attempts (job_id, number, worker_id, gpu_uuid, config, config_hash, token,
                        lease_expires_at, gpu_before, phase)
  VALUES (j.id, j.attempts_count, p_worker, p_gpu, j.current_config, md5(j.current_config::text),
          replace(gen_random_uuid()::text, '-', '') || replace(gen_random_uuid()::text, '-', ''),
          now() + make_interval(secs => p_lease_s), p_gpu_before, 'start')
  RETURNING * INTO a;
  INSERT INTO events (job_id, attempt_id, kind, from_state, to_state, reason, data)
  VALUES (j.id, a.id, 'leased', 'queued', 'running', 'attempt ' || a.number || ' started',
          jsonb_build_object('number', a.number, 'worker_id', p_worker, 'gpu_uuid', p_gpu,
                             'config_hash', a.config_hash));
  RETURN jsonb_build_object('status', 'ok', 'lease', jsonb_build_object(
    'attempt_id', a.id, 'job_id', j.id, 'number', a.number, 'token', a.token,
    'config', a.config, 'lease_seconds', p_lease_s));
END $$;

-- Claim for many parked GPUs: p is [{"i", "worker", "gpu", "before", "fresh"}], served in array
-- order, each with every rule of rung_claim (worker known and online, GPU its own and not
-- quarantined, the job rules of rung_claim_eligible, SKIP LOCKED). One index scan locks the first
-- n unlocked queued jobs (n = items); each GPU takes the first of them, in claim order, that it may
-- run; a GPU that may run none of them falls back to rung_claim's own scan when more jobs may be
-- queued beyond them. Fresh items must come first: once nothing is left to claim, the items that
-- are not fresh (their worker and GPU were checked by an earlier claim) are skipped without a write. Rows: every fresh item, and
-- every other one that got a lease or a worker/GPU error, as (i, status "ok" | "none" |
-- "no_worker" | "no_gpu", and for "ok" the attempt id, job id, attempt number, token and LEASE
-- without heartbeat_ms); a missing row means "none".
CREATE OR REPLACE FUNCTION rung_claim_batch(p jsonb, p_lease_s int)
RETURNS TABLE (i int, status text, attempt_id bigint, job_id bigint, number int, token text, lease jsonb)
LANGUAGE plpgsql AS $$
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
    WHERE id = wid RETURNING * INTO w;
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
        r := rung_claim_start(ids[chosen], wid, gpu, p_lease_s,
                              CASE WHEN jsonb_typeof(e->'before') = 'object' THEN e->'before' END);
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
      RETURN NEXT;
    END IF;
  END LOOP;
END $$;

-- Submit many jobs: p is [{"i", "name", "owner", "kind", "priority", "recovery", "key", "body"}]
-- (key: the owner-scoped Idempotency-Key or null; body: the request, whose "config" is the job's
-- config). Each item is rung_submit's insert-or-return-existing (the same request hash, md5 of the
-- body as jsonb text), in array order, so a repeated key later in the same batch finds the earlier
-- job. One NOTIFY for the whole batch when any job was created. Rows: (i, status "created" |
-- "existing" | "conflict", the job's id, JOB) per item.
CREATE OR REPLACE FUNCTION rung_submit_batch(p jsonb)
RETURNS TABLE (i int, status text, job_id bigint, job jsonb) LANGUAGE plpgsql AS $$
DECLARE
  e jsonb;
  j jobs;
  h text;
  created int := 0;
BEGIN
  FOR e IN SELECT x FROM jsonb_array_elements(p) x LOOP
    i := (e->>'i')::int;
    h := md5((e->'body')::text);
    INSERT INTO jobs (name, owner, kind, priority, target_config, current_config, recovery,
                      idempotency_key, request_hash)
    VALUES (e->>'name', e->>'owner', e->>'kind', (e->>'priority')::int, e->'body'->'config',
            e->'body'->'config', e->'recovery', e->>'key', h)
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING * INTO j;
    IF NOT FOUND THEN
      SELECT * INTO j FROM jobs WHERE idempotency_key = e->>'key';
      status := CASE WHEN j.request_hash IS DISTINCT FROM h THEN 'conflict' ELSE 'existing' END;
    ELSE
      INSERT INTO events (job_id, kind, to_state, reason, data)
      VALUES (j.id, 'submitted', 'queued', 'submitted',
              jsonb_build_object('kind', j.kind, 'priority', j.priority, 'owner', j.owner));
      created := created + 1;
      status := 'created';
    END IF;
    job_id := j.id;
    job := rung_job_json(j);
    RETURN NEXT;
  END LOOP;
  IF created > 0 THEN PERFORM pg_notify('rung_jobs', ''); END IF;
END $$;

-- Heartbeats of many attempts: p is [{"i", "id", "token", "phase", "step", "total", "mem"}] with
-- distinct ids. Each is heartbeat.sql's fenced update (id, token, state running); the rows are
-- locked in id order so concurrent batches cannot deadlock. A worker's last_seen_at is touched
-- unless another statement holds that worker row (it is being touched already). Rows: (i,
-- cancel_requested) for each item whose fence held; a missing row means 409.
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
                 ORDER BY k.id FOR UPDATE SKIP LOCKED))
  SELECT a.i, j.cancel_requested FROM a JOIN jobs j ON j.id = a.job_id
$$;

-- rung_finish_ctx with the fleet's largest usable GPU memory given (a batch computes it once
-- instead of scanning gpus per attempt). Same CTX otherwise.
CREATE OR REPLACE FUNCTION rung_finish_ctx_fleet(p_attempt bigint, p_token text, p_facts jsonb,
                                                 p_fleet_max int) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  WITH a AS (SELECT * FROM attempts WHERE id = p_attempt AND token = p_token AND state = 'running'),
  j AS (SELECT jobs.* FROM jobs JOIN a ON jobs.id = a.job_id),
  g AS (SELECT gpus.* FROM gpus JOIN a ON gpus.uuid = a.gpu_uuid)
  SELECT jsonb_build_object(
    'job', jsonb_build_object('id', j.id, 'kind', j.kind, 'target_config', j.target_config,
                              'current_config', j.current_config, 'recovery', j.recovery,
                              'recovery_state', j.recovery_state, 'constraints', j.constraints,
                              'cancel_requested', j.cancel_requested),
    'attempts', coalesce((
      SELECT jsonb_agg(jsonb_build_object(
        'id', p.id, 'number', p.number, 'worker_id', p.worker_id, 'gpu_uuid', p.gpu_uuid,
        'gpu_memory_mib', pg.memory_total_mib, 'config', p.config, 'state', p.state,
        'outcome', p.outcome, 'class', p.class, 'action', p.action, 'rung', p.rung,
        'facts', CASE WHEN p.facts IS NULL THEN NULL
                      ELSE p.facts || jsonb_build_object('log_tail', coalesce(p.log_tail, '[]')) END,
        'duration_ms', coalesce((p.facts->>'duration_ms')::bigint,
                                (extract(epoch FROM (coalesce(p.ended_at, now()) - p.started_at)) * 1000)::bigint))
        ORDER BY p.number)
      FROM attempts p LEFT JOIN gpus pg ON pg.uuid = p.gpu_uuid
      WHERE p.job_id = j.id AND p.id <> a.id), '[]'),
    'attempt', jsonb_build_object(
      'id', a.id, 'number', a.number, 'worker_id', a.worker_id, 'gpu_uuid', a.gpu_uuid,
      'gpu_memory_mib', g.memory_total_mib, 'config', a.config, 'state', a.state,
      'outcome', NULL, 'class', NULL, 'action', NULL, 'rung', NULL, 'facts', p_facts,
      'duration_ms', coalesce((p_facts->>'duration_ms')::bigint,
                              (extract(epoch FROM (now() - a.started_at)) * 1000)::bigint)),
    'gpu', jsonb_build_object(
      'uuid', a.gpu_uuid, 'state', coalesce(g.state, 'ok'), 'memory_total_mib', g.memory_total_mib,
      'env_faults_in_window', (
        SELECT count(*) FROM gpu_faults f
        WHERE f.gpu_uuid = a.gpu_uuid
          AND f.at > greatest(now() - make_interval(secs => coalesce((j.recovery->>'env_fault_window_s')::int, 3600)),
                              coalesce(g.released_at, '-infinity')))),
    'fleet', jsonb_build_object('max_gpu_memory_mib', p_fleet_max),
    'config_succeeded_before', EXISTS (SELECT 1 FROM attempts s
                                       WHERE s.config_hash = a.config_hash AND s.outcome = 'succeeded'))
  FROM a JOIN j ON true LEFT JOIN g ON true
$$;

-- The single-attempt CTX (finish_ctx.sql) is the same function, the fleet computed per call.
CREATE OR REPLACE FUNCTION rung_finish_ctx(p_attempt bigint, p_token text, p_facts jsonb) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT rung_finish_ctx_fleet(p_attempt, p_token, p_facts,
    coalesce((SELECT max(memory_total_mib) FROM gpus WHERE state <> 'quarantined'), 0))
$$;

-- CTX of many finishing attempts in one snapshot: p is [{"i", "id", "token", "facts"}]. Rows: (i,
-- CTX or NULL when the fence fails), as rung_finish_ctx.
CREATE OR REPLACE FUNCTION rung_finish_ctx_batch(p jsonb) RETURNS TABLE (i int, ctx jsonb)
LANGUAGE sql STABLE AS $$
  SELECT x.i, rung_finish_ctx_fleet(x.id, x.token, x.facts, f.m)
  FROM (SELECT coalesce((SELECT max(memory_total_mib) FROM gpus WHERE state <> 'quarantined'), 0) AS m) f,
       jsonb_to_recordset(p) AS x(i int, id bigint, token text, facts jsonb)
$$;

-- Apply many DECISIONs: p is [{"i", "id", "token", "facts", "decision", "report"}], ideally in
-- attempt id order (rows are locked in array order). Each item is rung_finish_apply, fenced by
-- its token. Rows: (i, reply or NULL when fenced out). An error in any item fails the whole
-- statement (nothing is applied): rungd then applies the items one at a time.
CREATE OR REPLACE FUNCTION rung_finish_apply_batch(p jsonb) RETURNS TABLE (i int, doc jsonb)
LANGUAGE plpgsql AS $$
DECLARE
  e jsonb;
BEGIN
  FOR e IN SELECT x FROM jsonb_array_elements(p) x LOOP
    i := (e->>'i')::int;
    doc := rung_finish_apply((e->>'id')::bigint, e->>'token', e->'facts', e->'decision',
                             CASE WHEN jsonb_typeof(e->'report') = 'object' THEN e->'report' END);
    RETURN NEXT;
  END LOOP;
END $$;
