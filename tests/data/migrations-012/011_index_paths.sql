-- Batch statements find their rows by primary key, whatever the planner's statistics say.
-- jsonb_to_recordset() is estimated at 100 rows, so "these 20 attempts, if still running" was
-- planned as a read of every running attempt through the attempts_one_running partial index,
-- hash-joined with the batch, and a claim round's "these jobs, if still queued" as a read of the
-- whole queue through jobs_claim: each batch cost O(running attempts) or O(queue length) instead
-- of O(batch). (Adding `id = ANY (the batch's ids)` was not enough: with stale statistics the
-- planner still preferred the partial index.) Now each lookup is a LATERAL primary-key probe
-- (OFFSET 0: planned on its own), a state test next to a probe is written `(state = ...) IS TRUE`,
-- which the planner cannot match to a partial index's predicate, and an UPDATE of rows found
-- earlier in the statement also names them as `id = ANY (their ids)`, so that it is a primary-key
-- lookup even when the planner expects a hundred of them. Restated whole (an applied migration is never edited); only those
-- lookups, the CTX's per-attempt GPU lookup and the two indexes below are new.
--
-- gpus had no index on worker_id: every lease's ownership check counted a worker's GPUs with a
-- scan of the whole fleet, and the CTX's largest usable GPU memory read every GPU once per batch.
CREATE INDEX gpus_worker ON gpus (worker_id);
CREATE INDEX gpus_usable_memory ON gpus (memory_total_mib) WHERE state <> 'quarantined';

-- p is [{"i", "worker", "gpu", "before", "fresh"}], served in array order, as 004 documents.
-- Rows: (i, status "ok" | "none" | "no_worker" | "no_gpu", and for "ok" the attempt id, job id,
-- attempt number, token, LEASE without config and heartbeat_ms, and the config as text).
CREATE OR REPLACE FUNCTION rung_claim_batch(p jsonb, p_lease_s int)
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
  -- still queued, unless a later waiter's rung_claim() fallback started it (its SKIP LOCKED does not
  -- skip this statement's own locks): that waiter keeps the job, this one gets no row and parks.
  RETURN QUERY
  WITH c AS MATERIALIZED (
    SELECT * FROM unnest(c_i, c_job, c_worker, c_gpu, c_before) AS c(i, job_id, worker_id, gpu, before)),
  j AS (
    UPDATE jobs SET state = 'running', attempts_count = attempts_count + 1, updated_at = now(),
                    next_action = NULL
    -- `IS TRUE`: the planner cannot match it to jobs_claim's predicate, so it probes these few
    -- jobs by primary key instead of reading the whole queue through that index
    FROM c WHERE jobs.id = c.job_id AND jobs.id = ANY (c_job) AND (jobs.state = 'queued') IS TRUE
    -- the config is printed once, then hashed and returned as that text
    RETURNING jobs.id, jobs.attempts_count, jobs.current_config,
              coalesce(jobs.current_config, jobs.target_config)::text AS cfg),
  a AS (
    INSERT INTO attempts (job_id, number, worker_id, gpu_uuid, config, config_hash, token,
                          lease_expires_at, gpu_before, phase)
    SELECT j.id, j.attempts_count, c.worker_id, c.gpu, j.current_config, md5(j.cfg),
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
         j.cfg
  FROM c JOIN a ON a.job_id = c.job_id JOIN j ON j.id = c.job_id;
END $$;

-- Heartbeats of many attempts (004), touching each worker's last_seen_at at most once a second.
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

CREATE OR REPLACE FUNCTION rung_finish_apply_batch(p jsonb) RETURNS TABLE (i int, doc jsonb)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  e jsonb;
BEGIN
  -- (jsonpath tests scan p in place: no element of it is copied)
  -- NOTIFY is sent at commit: one for the batch when a plain decision re-queues (a cancel may turn
  -- it into none: a spare wake-up finds nothing to claim)
  IF p @? '$[*] ? (@.decision.job_state == "queued" && !(@.decision.gpu.type() == "object")
                   && !(@.decision.escalation.type() == "object") && !(@.decision.class == "env_fault"))' THEN
    PERFORM pg_notify('rung_jobs', '');
  END IF;
  IF p @? '$[*] ? (!(@.decision.gpu.type() == "object") && !(@.decision.escalation.type() == "object")
                   && !(@.decision.class == "env_fault"))' THEN
    RETURN QUERY
    WITH x AS MATERIALIZED (
      SELECT * FROM jsonb_to_recordset(p) AS x(i int, id bigint, token text, facts jsonb, decision jsonb)
      WHERE jsonb_typeof(x.decision->'gpu') IS DISTINCT FROM 'object'
        AND jsonb_typeof(x.decision->'escalation') IS DISTINCT FROM 'object'
        AND x.decision->>'class' IS DISTINCT FROM 'env_fault'),
    la AS MATERIALIZED (
      -- one primary-key probe per item, fenced, then locked in array (attempt id) order; see the
      -- heartbeats. It keeps the item (i) that passed the fence: a stale item may name the same id.
      SELECT t.id, x.i FROM x CROSS JOIN LATERAL (SELECT t.id FROM attempts t
                                             WHERE t.id = x.id AND t.token = x.token
                                               AND (t.state = 'running') IS TRUE
                                             OFFSET 0 FOR UPDATE) t),
    a AS (
      UPDATE attempts t SET state = 'ended',
        outcome = CASE x.decision->>'class' WHEN 'success' THEN 'succeeded' WHEN 'cancelled' THEN 'cancelled'
                                            ELSE 'failed' END,
        ended_at = now(), class = x.decision->>'class', rule = x.decision->>'rule',
        evidence = x.decision->'evidence', action = x.decision->>'action', rung = x.decision->>'rung',
        changes = x.decision->'changes', facts = x.facts - 'log_tail',
        log_tail = coalesce(x.facts->'log_tail', '[]'),
        phase = coalesce(x.facts->>'phase', t.phase),
        step = coalesce((x.facts->>'last_step')::int, t.step),
        total_steps = coalesce((x.facts->>'total_steps')::int, t.total_steps)
      FROM x JOIN la ON la.i = x.i
      WHERE t.id = la.id AND t.id = ANY (ARRAY(SELECT la.id FROM la))
      RETURNING x.i, t.id, t.job_id, t.number, t.outcome, t.config, x.decision),
    lj AS MATERIALIZED (
      SELECT jb.id, jb.state, jb.cancel_requested FROM jobs jb
      WHERE jb.id = ANY (ARRAY(SELECT a.job_id FROM a)) ORDER BY jb.id FOR UPDATE OF jb),
    d AS MATERIALIZED (
      SELECT a.*, lj.state AS old_state, dd, coalesce(dd->>'job_state', 'failed') AS new_state
      FROM a JOIN lj ON lj.id = a.job_id,
      LATERAL (SELECT CASE WHEN lj.cancel_requested AND coalesce(a.decision->>'job_state', 'failed') = 'queued'
                           THEN a.decision || jsonb_build_object('job_state', 'cancelled', 'next_config', NULL,
                                                                 'reason', 'cancelled: ' || coalesce(a.decision->>'reason', ''))
                           ELSE a.decision END AS dd) c),
    uj AS (
      UPDATE jobs SET
        state = d.new_state,
        current_config = CASE WHEN jsonb_typeof(d.dd->'next_config') = 'object'
                              THEN rung_config_or_null(d.dd->'next_config', jobs.target_config)
                              ELSE jobs.current_config END,
        constraints = CASE WHEN jsonb_typeof(d.dd->'constraints') = 'object'
                           THEN rung_merge_constraints(jobs.constraints, d.dd->'constraints') ELSE jobs.constraints END,
        recovery_state = CASE WHEN jsonb_typeof(d.dd->'recovery_state') = 'object' THEN d.dd->'recovery_state'
                              ELSE jobs.recovery_state END,
        result = CASE WHEN d.new_state = 'queued' THEN jobs.result
                      ELSE jsonb_build_object('attempt_id', d.id, 'class', d.dd->>'class', 'rule', d.dd->>'rule',
                                              'reason', d.dd->>'reason')
                           || CASE WHEN d.new_state = 'succeeded' AND d.config IS NULL THEN '{}'::jsonb
                                   ELSE jsonb_build_object('config', CASE WHEN d.new_state = 'succeeded' THEN d.config END) END
                           || CASE WHEN jsonb_typeof(d.dd->'result') = 'object' THEN d.dd->'result' ELSE '{}' END END,
        finished_at = CASE WHEN d.new_state = 'queued' THEN NULL ELSE now() END,
        next_action = CASE WHEN coalesce(d.dd->'recovery_state'->>'next_action', '') <> ''
                             THEN d.dd->'recovery_state'->>'next_action'
                           WHEN d.new_state = 'queued' THEN d.dd->>'reason' ELSE NULL END,
        updated_at = now()
      FROM d WHERE jobs.id = d.job_id AND jobs.id = ANY (ARRAY(SELECT d.job_id FROM d))),
    ev AS (
      INSERT INTO events (job_id, attempt_id, kind, from_state, to_state, reason, data)
      SELECT d.job_id, d.id, v.kind, v.from_state, v.to_state, d.dd->>'reason', v.data
      FROM d CROSS JOIN LATERAL (VALUES
        (1, 'attempt_ended', 'running', d.outcome,
         jsonb_build_object('number', d.number, 'class', d.dd->>'class', 'rule', d.dd->>'rule',
                            'evidence', d.dd->'evidence', 'action', d.dd->>'action', 'rung', d.dd->>'rung',
                            'changes', d.dd->'changes')),
        (2, 'job_' || d.new_state, d.old_state, d.new_state, NULL)) AS v(ord, kind, from_state, to_state, data)
      ORDER BY d.id, v.ord)
    -- a decision whose job_state is not a job state fails the jobs CHECK, as rung_finish_apply's
    -- RAISE does: the statement fails and rungd applies the items one at a time
    SELECT d.i, jsonb_build_object('attempt_id', d.id, 'job_id', d.job_id, 'job_state', d.new_state,
                                   'escalation_id', NULL, 'decision', d.dd)
    FROM d;
  END IF;

  IF NOT p @? '$[*] ? (@.decision.gpu.type() == "object" || @.decision.escalation.type() == "object"
                       || @.decision.class == "env_fault")' THEN
    RETURN;
  END IF;
  FOR e IN SELECT x FROM jsonb_array_elements(p) x
           WHERE jsonb_typeof(x->'decision'->'gpu') = 'object'
              OR jsonb_typeof(x->'decision'->'escalation') = 'object'
              OR x->'decision'->>'class' = 'env_fault'
           ORDER BY (x->>'id')::bigint LOOP
    i := (e->>'i')::int;
    doc := rung_finish_apply((e->>'id')::bigint, e->>'token', e->'facts', e->'decision',
                             CASE WHEN jsonb_typeof(e->'report') = 'object' THEN e->'report' END);
    RETURN NEXT;
  END LOOP;
END $$;

CREATE OR REPLACE FUNCTION rung_finish_ctx_batch(p jsonb) RETURNS TABLE (i int, ctx jsonb)
LANGUAGE sql STABLE AS $$
  WITH f AS (SELECT coalesce((SELECT max(memory_total_mib) FROM gpus WHERE state <> 'quarantined'), 0) AS m),
  x AS (SELECT * FROM jsonb_to_recordset(p) AS x(i int, id bigint, token text, facts jsonb))
  SELECT x.i, jsonb_build_object(
    'job', jsonb_build_object('id', j.id, 'kind', j.kind, 'target_config', j.target_config,
                              'current_config', j.current_config, 'recovery', j.recovery,
                              'recovery_state', j.recovery_state, 'constraints', j.constraints,
                              'cancel_requested', j.cancel_requested),
    'attempts', coalesce((
      SELECT jsonb_agg(jsonb_build_object(
        'id', o.id, 'number', o.number, 'worker_id', o.worker_id, 'gpu_uuid', o.gpu_uuid,
        'gpu_memory_mib', (SELECT og.memory_total_mib FROM gpus og WHERE og.uuid = o.gpu_uuid),
        'config', o.config, 'state', o.state,
        'outcome', o.outcome, 'class', o.class, 'action', o.action, 'rung', o.rung,
        'facts', CASE WHEN o.facts IS NULL THEN NULL
                      ELSE o.facts || jsonb_build_object('log_tail', coalesce(o.log_tail, '[]')) END,
        'duration_ms', coalesce((o.facts->>'duration_ms')::bigint,
                                (extract(epoch FROM (coalesce(o.ended_at, now()) - o.started_at)) * 1000)::bigint))
        ORDER BY o.number)
      FROM attempts o
      WHERE o.job_id = j.id AND o.id <> a.id), '[]'),
    'attempt', jsonb_build_object(
      'id', a.id, 'number', a.number, 'worker_id', a.worker_id, 'gpu_uuid', a.gpu_uuid,
      'gpu_memory_mib', g.memory_total_mib, 'config', a.config, 'state', a.state,
      'outcome', NULL, 'class', NULL, 'action', NULL, 'rung', NULL, 'facts', x.facts,
      'duration_ms', coalesce((x.facts->>'duration_ms')::bigint,
                              (extract(epoch FROM (now() - a.started_at)) * 1000)::bigint)),
    'gpu', jsonb_build_object(
      'uuid', a.gpu_uuid, 'state', coalesce(g.state, 'ok'), 'memory_total_mib', g.memory_total_mib,
      'env_faults_in_window', (
        SELECT count(*) FROM gpu_faults gf
        WHERE gf.gpu_uuid = a.gpu_uuid
          AND gf.at > greatest(now() - make_interval(secs => coalesce((j.recovery->>'env_fault_window_s')::int, 3600)),
                               coalesce(g.released_at, '-infinity')))),
    'fleet', jsonb_build_object('max_gpu_memory_mib', f.m),
    'config_succeeded_before', EXISTS (SELECT 1 FROM attempts s
                                       WHERE s.config_hash = a.config_hash AND s.outcome = 'succeeded'))
  -- one primary-key probe per item and per row it joins (OFFSET 0: planned alone; see the
  -- heartbeats)
  FROM x CROSS JOIN f
  CROSS JOIN LATERAL (SELECT * FROM attempts a
                      WHERE a.id = x.id AND a.token = x.token AND (a.state = 'running') IS TRUE OFFSET 0) a
  CROSS JOIN LATERAL (SELECT * FROM jobs j WHERE j.id = a.job_id OFFSET 0) j
  LEFT JOIN LATERAL (SELECT * FROM gpus g WHERE g.uuid = a.gpu_uuid OFFSET 0) g ON true
$$;

-- Only keyed submits store a request_hash (007 hashed every body): it is compared only when a later
-- submit repeats the Idempotency-Key, which a keyless job does not have, and printing a ~3 KB body
-- to hash it was about 7 % of Postgres' time per submit.
CREATE OR REPLACE FUNCTION rung_submit_set(p jsonb)
RETURNS TABLE (i int, status text, job_id bigint, job jsonb, target text, current text) LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
  -- plpgsql, not sql: the statement is planned once per connection instead of once per call
  RETURN QUERY
  WITH x AS MATERIALIZED (
    SELECT (e->>'i')::int AS i, e, nextval(pg_get_serial_sequence('jobs', 'id')) AS id
    FROM jsonb_array_elements(p) e),
  ins AS (
    INSERT INTO jobs (id, name, owner, kind, priority, target_config, current_config, recovery, request_hash)
    SELECT x.id, x.e->>'name', x.e->>'owner', x.e->>'kind', (x.e->>'priority')::int, x.e->'body'->'config', NULL,
           x.e->'recovery', NULL
    FROM x ORDER BY x.id
    RETURNING *),
  ev AS (
    INSERT INTO events (job_id, kind, to_state, reason, data)
    SELECT ins.id, 'submitted', 'queued', 'submitted',
           jsonb_build_object('kind', ins.kind, 'priority', ins.priority, 'owner', ins.owner)
    FROM ins ORDER BY ins.id)
  SELECT x.i, 'created'::text, ins.id, rung_job_json_lean(ins::jobs), ins.target_config::text, NULL::text
  FROM x JOIN ins ON ins.id = x.id ORDER BY x.i;
END $$;

CREATE OR REPLACE FUNCTION rung_submit_batch(p jsonb)
RETURNS TABLE (i int, status text, job_id bigint, job jsonb, target text, current text) LANGUAGE plpgsql AS $$
DECLARE
  e jsonb;
  j jobs;
  h text;
  created int := 0;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM jsonb_array_elements(p) k WHERE jsonb_typeof(k->'key') = 'string') THEN
    RETURN QUERY SELECT * FROM rung_submit_set(p);
    IF jsonb_array_length(p) > 0 THEN PERFORM pg_notify('rung_jobs', ''); END IF;
    RETURN;
  END IF;
  FOR e IN SELECT x FROM jsonb_array_elements(p) x LOOP
    i := (e->>'i')::int;
    h := CASE WHEN jsonb_typeof(e->'key') = 'string' THEN md5((e->'body')::text) END;
    INSERT INTO jobs (name, owner, kind, priority, target_config, current_config, recovery,
                      idempotency_key, request_hash)
    VALUES (e->>'name', e->>'owner', e->>'kind', (e->>'priority')::int, e->'body'->'config',
            NULL, e->'recovery', e->>'key', h)
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
    job := rung_job_json_lean(j);
    target := j.target_config::text;
    current := j.current_config::text;
    RETURN NEXT;
  END LOOP;
  IF created > 0 THEN PERFORM pg_notify('rung_jobs', ''); END IF;
END $$;
