-- rung's schema: jobs, attempts, workers, gpus (+ env faults), events, escalations, and the
-- PL/pgSQL functions that make each HTTP call one statement (one round trip, one transaction).
-- Hot rows (attempts heartbeats) update only unindexed columns so the updates stay HOT.

CREATE TABLE workers (
  id           bigserial PRIMARY KEY,
  name         text NOT NULL UNIQUE,
  host         text NOT NULL DEFAULT '',
  state        text NOT NULL DEFAULT 'online' CHECK (state IN ('online', 'draining', 'offline')),
  created_at   timestamptz NOT NULL DEFAULT now(),
  last_seen_at timestamptz NOT NULL DEFAULT now()
) WITH (fillfactor = 80);

CREATE TABLE gpus (
  uuid             text PRIMARY KEY,
  worker_id        bigint REFERENCES workers (id),
  idx              int NOT NULL DEFAULT 0,
  name             text NOT NULL DEFAULT '',
  memory_total_mib int NOT NULL DEFAULT 0,
  state            text NOT NULL DEFAULT 'ok' CHECK (state IN ('ok', 'suspect', 'quarantined')),
  reason           text,
  released_at      timestamptz,
  updated_at       timestamptz NOT NULL DEFAULT now()
);

-- One row per environment fault seen on a GPU; the policy counts them in a time window.
CREATE TABLE gpu_faults (
  id         bigserial PRIMARY KEY,
  gpu_uuid   text NOT NULL REFERENCES gpus (uuid),
  job_id     bigint,
  attempt_id bigint,
  at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX gpu_faults_gpu_at ON gpu_faults (gpu_uuid, at);

CREATE TABLE jobs (
  id               bigserial PRIMARY KEY,
  name             text NOT NULL DEFAULT '',
  owner            text NOT NULL DEFAULT 'anonymous',
  kind             text NOT NULL CHECK (kind IN ('image', 'video')),
  state            text NOT NULL DEFAULT 'queued'
                   CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
  priority         int NOT NULL DEFAULT 100,
  target_config    jsonb NOT NULL,
  current_config   jsonb NOT NULL,
  recovery         jsonb NOT NULL,
  recovery_state   jsonb NOT NULL DEFAULT '{}',
  constraints      jsonb NOT NULL DEFAULT '{}',
  idempotency_key  text UNIQUE,
  request_hash     text,
  cancel_requested boolean NOT NULL DEFAULT false,
  attempts_count   int NOT NULL DEFAULT 0,
  lost_count       int NOT NULL DEFAULT 0,
  result           jsonb,
  next_action      text,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  finished_at      timestamptz
) WITH (fillfactor = 80, autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 100,
        autovacuum_analyze_scale_factor = 0.02);
-- The claim scan: only queued jobs, in claim order.
CREATE INDEX jobs_claim ON jobs (priority, created_at, id) WHERE state = 'queued';
CREATE INDEX jobs_state_id ON jobs (state, id);

CREATE TABLE attempts (
  id                bigserial PRIMARY KEY,
  job_id            bigint NOT NULL REFERENCES jobs (id),
  number            int NOT NULL,
  worker_id         bigint REFERENCES workers (id),
  gpu_uuid          text,
  config            jsonb NOT NULL,
  config_hash       text NOT NULL,
  token             text NOT NULL,
  lease_expires_at  timestamptz NOT NULL,          -- never indexed: heartbeats stay HOT
  last_heartbeat_at timestamptz,
  state             text NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'ended', 'lost')),
  outcome           text CHECK (outcome IN ('succeeded', 'failed', 'cancelled', 'lost')),
  phase             text,
  step              int,
  total_steps       int,
  memory_used_mib   int,
  class             text,
  rule              text,
  evidence          jsonb,
  action            text,
  rung              text,
  changes           jsonb,
  facts             jsonb,                          -- FACTS without log_tail
  log_tail          jsonb,
  gpu_before        jsonb,
  started_at        timestamptz NOT NULL DEFAULT now(),
  ended_at          timestamptz,
  UNIQUE (job_id, number)
) WITH (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 100,
        autovacuum_analyze_scale_factor = 0.02);
-- A job never has two running attempts at once.
CREATE UNIQUE INDEX attempts_one_running ON attempts (job_id) WHERE state = 'running';
CREATE INDEX attempts_job_config ON attempts (job_id, config_hash);
CREATE INDEX attempts_succeeded_hash ON attempts (config_hash) WHERE outcome = 'succeeded';

CREATE TABLE events (
  id         bigserial PRIMARY KEY,
  job_id     bigint,                                -- null for fleet events
  attempt_id bigint,
  kind       text NOT NULL,
  from_state text,
  to_state   text,
  reason     text,
  data       jsonb,
  at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX events_job ON events (job_id, id);

CREATE TABLE escalations (
  id              bigserial PRIMARY KEY,
  job_id          bigint NOT NULL REFERENCES jobs (id),
  attempt_id      bigint,
  trigger         text NOT NULL,
  state           text NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'acknowledged', 'resolved')),
  summary         text,
  recommendation  text,
  report_markdown text,
  report          jsonb,
  note            text,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX escalations_state ON escalations (state, id);
CREATE INDEX escalations_job ON escalations (job_id);

-- JSON shapes of the API (docs/DESIGN.md).
CREATE FUNCTION rung_job_json(j jobs) RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object(
    'id', j.id, 'name', j.name, 'state', j.state, 'kind', j.kind, 'priority', j.priority,
    'owner', j.owner, 'target_config', j.target_config, 'current_config', j.current_config,
    'recovery', j.recovery, 'recovery_state', j.recovery_state, 'constraints', j.constraints,
    'attempts', j.attempts_count, 'lost_count', j.lost_count,
    'cancel_requested', j.cancel_requested, 'created_at', j.created_at, 'updated_at', j.updated_at,
    'finished_at', j.finished_at, 'result', j.result, 'next_action', j.next_action)
$$;

CREATE FUNCTION rung_attempt_json(a attempts) RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object(
    'id', a.id, 'job_id', a.job_id, 'number', a.number, 'worker_id', a.worker_id,
    'gpu_uuid', a.gpu_uuid, 'state', a.state, 'outcome', a.outcome, 'phase', a.phase,
    'step', a.step, 'total_steps', a.total_steps, 'memory_used_mib', a.memory_used_mib,
    'class', a.class, 'rule', a.rule, 'evidence', a.evidence, 'action', a.action, 'rung', a.rung,
    'changes', a.changes, 'config', a.config, 'config_hash', a.config_hash,
    'facts', CASE WHEN a.facts IS NULL THEN NULL
                  ELSE a.facts || jsonb_build_object('log_tail', coalesce(a.log_tail, '[]')) END,
    'gpu_before', a.gpu_before, 'lease_expires_at', a.lease_expires_at,
    'last_heartbeat_at', a.last_heartbeat_at, 'started_at', a.started_at, 'ended_at', a.ended_at)
$$;

CREATE FUNCTION rung_gpu_json(g gpus) RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object(
    'uuid', g.uuid, 'worker_id', g.worker_id, 'index', g.idx, 'name', g.name,
    'memory_total_mib', g.memory_total_mib, 'state', g.state, 'reason', g.reason,
    'env_faults', (SELECT count(*) FROM gpu_faults f
                   WHERE f.gpu_uuid = g.uuid AND f.at > coalesce(g.released_at, '-infinity')),
    'released_at', g.released_at, 'updated_at', g.updated_at)
$$;

CREATE FUNCTION rung_escalation_json(e escalations, full_report boolean) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object(
    'id', e.id, 'job_id', e.job_id, 'attempt_id', e.attempt_id, 'trigger', e.trigger,
    'state', e.state, 'summary', e.summary, 'recommendation', e.recommendation, 'note', e.note,
    'created_at', e.created_at, 'updated_at', e.updated_at)
    || CASE WHEN full_report
            THEN jsonb_build_object('report_markdown', e.report_markdown, 'report', e.report)
            ELSE '{}'::jsonb END
$$;

-- Submit: insert a queued job, or return the one with the same Idempotency-Key.
-- Returns {"status": "created"|"existing"|"conflict", "job": JOB}.
CREATE FUNCTION rung_submit(p_name text, p_owner text, p_kind text, p_priority int, p_config jsonb,
                            p_recovery jsonb, p_key text, p_hash text) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  j jobs;
BEGIN
  INSERT INTO jobs (name, owner, kind, priority, target_config, current_config, recovery,
                    idempotency_key, request_hash)
  VALUES (p_name, p_owner, p_kind, p_priority, p_config, p_config, p_recovery, p_key, p_hash)
  ON CONFLICT (idempotency_key) DO NOTHING
  RETURNING * INTO j;
  IF NOT FOUND THEN
    SELECT * INTO j FROM jobs WHERE idempotency_key = p_key;
    IF j.request_hash IS DISTINCT FROM p_hash THEN
      RETURN jsonb_build_object('status', 'conflict', 'job', rung_job_json(j));
    END IF;
    RETURN jsonb_build_object('status', 'existing', 'job', rung_job_json(j));
  END IF;
  INSERT INTO events (job_id, kind, to_state, reason, data)
  VALUES (j.id, 'submitted', 'queued', 'submitted',
          jsonb_build_object('kind', j.kind, 'priority', j.priority, 'owner', j.owner));
  PERFORM pg_notify('rung_jobs', j.id::text);
  RETURN jsonb_build_object('status', 'created', 'job', rung_job_json(j));
END $$;

-- Cancel: queued -> cancelled now; running -> cancel_requested; finished jobs unchanged.
-- Returns JOB, or NULL when there is no such job.
CREATE FUNCTION rung_cancel(p_job bigint) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  j jobs;
BEGIN
  SELECT * INTO j FROM jobs WHERE id = p_job FOR UPDATE;
  IF NOT FOUND THEN RETURN NULL; END IF;
  IF j.state = 'queued' THEN
    UPDATE jobs SET state = 'cancelled', cancel_requested = true, finished_at = now(),
                    updated_at = now(), next_action = NULL,
                    result = jsonb_build_object('class', 'cancelled', 'reason', 'cancelled while queued')
    WHERE id = p_job RETURNING * INTO j;
    INSERT INTO events (job_id, kind, from_state, to_state, reason)
    VALUES (j.id, 'cancelled', 'queued', 'cancelled', 'cancelled while queued');
  ELSIF j.state = 'running' AND NOT j.cancel_requested THEN
    UPDATE jobs SET cancel_requested = true, updated_at = now(),
                    next_action = 'the worker stops the trainer at its next heartbeat'
    WHERE id = p_job RETURNING * INTO j;
    INSERT INTO events (job_id, kind, from_state, to_state, reason)
    VALUES (j.id, 'cancel_requested', 'running', 'running', 'cancel requested while running');
  END IF;
  RETURN rung_job_json(j);
END $$;

-- Register a worker (upsert by name) and its GPUs (upsert by uuid; their state is kept).
-- Returns {"id", "created": bool}.
CREATE FUNCTION rung_register(p_name text, p_host text, p_gpus jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  w_id bigint;
  created boolean;
BEGIN
  INSERT INTO workers AS w (name, host) VALUES (p_name, p_host)
  ON CONFLICT (name) DO UPDATE SET host = excluded.host, state = 'online', last_seen_at = now()
  RETURNING w.id, (xmax = 0) INTO w_id, created;
  INSERT INTO gpus AS g (uuid, worker_id, idx, name, memory_total_mib)
  SELECT x->>'uuid', w_id, coalesce((x->>'index')::int, 0), coalesce(x->>'name', ''),
         coalesce((x->>'memory_total_mib')::int, 0)
  FROM jsonb_array_elements(coalesce(p_gpus, '[]')) x
  ON CONFLICT (uuid) DO UPDATE SET worker_id = excluded.worker_id, idx = excluded.idx,
    name = excluded.name, memory_total_mib = excluded.memory_total_mib, updated_at = now();
  RETURN jsonb_build_object('id', w_id, 'created', created);
END $$;

-- Claim the first eligible queued job for one GPU and start an attempt on it.
-- Returns {"status": "ok", "lease": LEASE-without-heartbeat_ms} | {"status": "none"|"no_worker"|"no_gpu"}.
CREATE FUNCTION rung_claim(p_worker bigint, p_gpu text, p_lease_s int, p_gpu_before jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  w workers;
  g gpus;
  j jobs;
  a attempts;
BEGIN
  UPDATE workers SET last_seen_at = now(),
                     state = CASE WHEN state = 'offline' THEN 'online' ELSE state END
  WHERE id = p_worker RETURNING * INTO w;
  IF NOT FOUND THEN RETURN jsonb_build_object('status', 'no_worker'); END IF;
  SELECT * INTO g FROM gpus WHERE uuid = p_gpu;
  IF NOT FOUND OR g.worker_id IS DISTINCT FROM p_worker THEN
    RETURN jsonb_build_object('status', 'no_gpu');
  END IF;
  IF g.state = 'quarantined' OR w.state <> 'online' THEN
    RETURN jsonb_build_object('status', 'none');
  END IF;
  WITH cand AS MATERIALIZED (
    SELECT c.id FROM jobs c
    WHERE c.state = 'queued'
      AND NOT coalesce(c.constraints->'exclude_gpus' ? p_gpu, false)
      AND NOT coalesce(c.constraints->'exclude_workers' @> to_jsonb(p_worker), false)
      AND NOT coalesce(c.constraints->'exclude_workers' ? p_worker::text, false)
      AND coalesce((c.constraints->>'min_gpu_memory_mib')::int, 0) <= g.memory_total_mib
      AND NOT EXISTS (SELECT 1 FROM attempts f
                      WHERE f.job_id = c.id AND f.gpu_uuid = p_gpu AND f.outcome = 'failed'
                        AND f.config_hash = md5(c.current_config::text))
    ORDER BY c.priority, c.created_at, c.id
    LIMIT 1
    FOR UPDATE SKIP LOCKED)
  UPDATE jobs SET state = 'running', attempts_count = attempts_count + 1, updated_at = now(),
                  next_action = NULL
  FROM cand WHERE jobs.id = cand.id
  RETURNING jobs.* INTO j;
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

-- Undo a claim whose reply could not be delivered: the attempt never ran, so it disappears and
-- the job is queued again as it was. Returns true when it released something.
CREATE FUNCTION rung_release(p_attempt bigint, p_token text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  a attempts;
BEGIN
  DELETE FROM attempts WHERE id = p_attempt AND token = p_token AND state = 'running'
  RETURNING * INTO a;
  IF NOT FOUND THEN RETURN false; END IF;
  UPDATE jobs SET state = CASE WHEN cancel_requested THEN 'cancelled' ELSE 'queued' END,
                  finished_at = CASE WHEN cancel_requested THEN now() END,
                  attempts_count = attempts_count - 1, updated_at = now()
  WHERE id = a.job_id;
  INSERT INTO events (job_id, attempt_id, kind, from_state, to_state, reason)
  VALUES (a.job_id, a.id, 'lease_released', 'running', 'queued',
          'the worker went away before it received the lease');
  PERFORM pg_notify('rung_jobs', a.job_id::text);
  RETURN true;
END $$;

-- CTX for the policy (docs/DESIGN.md) for the running attempt (id, token), with the FACTS just
-- reported; NULL when the attempt is not the running one with that token.
CREATE FUNCTION rung_finish_ctx(p_attempt bigint, p_token text, p_facts jsonb) RETURNS jsonb
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
    'fleet', jsonb_build_object('max_gpu_memory_mib',
      coalesce((SELECT max(memory_total_mib) FROM gpus WHERE state <> 'quarantined'), 0)),
    'config_succeeded_before', EXISTS (SELECT 1 FROM attempts s
                                       WHERE s.config_hash = a.config_hash AND s.outcome = 'succeeded'))
  FROM a JOIN j ON true LEFT JOIN g ON true
$$;

-- Union of two constraint objects: exclusions accumulate, the newest min_gpu_memory_mib wins.
CREATE FUNCTION rung_merge_constraints(old jsonb, new jsonb) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
  SELECT jsonb_build_object(
    'exclude_gpus', coalesce((SELECT jsonb_agg(DISTINCT x) FROM (
        SELECT jsonb_array_elements(CASE WHEN jsonb_typeof(old->'exclude_gpus') = 'array' THEN old->'exclude_gpus' ELSE '[]' END)
        UNION ALL
        SELECT jsonb_array_elements(CASE WHEN jsonb_typeof(new->'exclude_gpus') = 'array' THEN new->'exclude_gpus' ELSE '[]' END)) s(x)), '[]'),
    'exclude_workers', coalesce((SELECT jsonb_agg(DISTINCT x) FROM (
        SELECT jsonb_array_elements(CASE WHEN jsonb_typeof(old->'exclude_workers') = 'array' THEN old->'exclude_workers' ELSE '[]' END)
        UNION ALL
        SELECT jsonb_array_elements(CASE WHEN jsonb_typeof(new->'exclude_workers') = 'array' THEN new->'exclude_workers' ELSE '[]' END)) s(x)), '[]'),
    'min_gpu_memory_mib', CASE WHEN jsonb_typeof(new->'min_gpu_memory_mib') = 'number' THEN new->'min_gpu_memory_mib'
                               ELSE coalesce(old->'min_gpu_memory_mib', 'null') END)
$$;

-- Apply a DECISION to the running attempt (id, token): end the attempt, move the job, write
-- events, mark the GPU, open the escalation with its report ({"markdown", "json"} or NULL).
-- Returns {"attempt_id", "job_id", "job_state", "decision"}, or NULL when the fence fails.
CREATE FUNCTION rung_finish_apply(p_attempt bigint, p_token text, p_facts jsonb, p_decision jsonb,
                                  p_report jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  a attempts;
  j jobs;
  d jsonb := p_decision;
  cls text := p_decision->>'class';
  v_outcome text;
  new_state text := coalesce(p_decision->>'job_state', 'failed');
  mark text;
  esc_id bigint;
BEGIN
  v_outcome := CASE WHEN cls = 'success' THEN 'succeeded'
                  WHEN cls = 'cancelled' THEN 'cancelled' ELSE 'failed' END;
  UPDATE attempts SET state = 'ended', outcome = v_outcome, ended_at = now(),
    class = cls, rule = d->>'rule', evidence = d->'evidence', action = d->>'action',
    rung = d->>'rung', changes = d->'changes', facts = p_facts - 'log_tail',
    log_tail = coalesce(p_facts->'log_tail', '[]'),
    phase = coalesce(p_facts->>'phase', phase),
    step = coalesce((p_facts->>'last_step')::int, step),
    total_steps = coalesce((p_facts->>'total_steps')::int, total_steps)
  WHERE id = p_attempt AND token = p_token AND state = 'running'
  RETURNING * INTO a;
  IF NOT FOUND THEN RETURN NULL; END IF;
  SELECT * INTO j FROM jobs WHERE id = a.job_id FOR UPDATE;
  IF j.cancel_requested AND new_state = 'queued' THEN
    new_state := 'cancelled';
    d := d || jsonb_build_object('job_state', 'cancelled', 'next_config', NULL,
                                 'reason', 'cancelled: ' || coalesce(d->>'reason', ''));
  END IF;
  IF new_state NOT IN ('queued', 'succeeded', 'failed', 'cancelled') THEN
    RAISE EXCEPTION 'decision job_state % is not a job state', new_state;
  END IF;
  UPDATE jobs SET
    state = new_state,
    current_config = CASE WHEN jsonb_typeof(d->'next_config') = 'object' THEN d->'next_config'
                          ELSE current_config END,
    constraints = CASE WHEN jsonb_typeof(d->'constraints') = 'object'
                       THEN rung_merge_constraints(constraints, d->'constraints') ELSE constraints END,
    recovery_state = CASE WHEN jsonb_typeof(d->'recovery_state') = 'object' THEN d->'recovery_state'
                          ELSE recovery_state END,
    result = CASE WHEN new_state = 'queued' THEN result
                  ELSE jsonb_build_object('attempt_id', a.id, 'class', cls, 'rule', d->>'rule',
                                          'reason', d->>'reason',
                                          'config', CASE WHEN new_state = 'succeeded' THEN a.config END)
                       || CASE WHEN jsonb_typeof(d->'result') = 'object' THEN d->'result' ELSE '{}' END END,
    finished_at = CASE WHEN new_state = 'queued' THEN NULL ELSE now() END,
    next_action = CASE WHEN coalesce(d->'recovery_state'->>'next_action', '') <> ''
                         THEN d->'recovery_state'->>'next_action'
                       WHEN jsonb_typeof(d->'escalation') = 'object' THEN d->'escalation'->>'recommendation'
                       WHEN new_state = 'queued' THEN d->>'reason' ELSE NULL END,
    updated_at = now()
  WHERE id = j.id;
  INSERT INTO events (job_id, attempt_id, kind, from_state, to_state, reason, data)
  VALUES (j.id, a.id, 'attempt_ended', 'running', a.outcome, d->>'reason',
          jsonb_build_object('number', a.number, 'class', cls, 'rule', d->>'rule',
                             'evidence', d->'evidence', 'action', d->>'action', 'rung', d->>'rung',
                             'changes', d->'changes')),
         (j.id, a.id, 'job_' || new_state, j.state, new_state, d->>'reason', NULL);
  IF jsonb_typeof(d->'gpu') = 'object' AND a.gpu_uuid IS NOT NULL THEN
    mark := d->'gpu'->>'mark';
    UPDATE gpus SET state = CASE WHEN mark = 'quarantine' THEN 'quarantined'
                                 WHEN state = 'quarantined' THEN state ELSE 'suspect' END,
                    reason = d->>'reason', updated_at = now()
    WHERE uuid = coalesce(d->'gpu'->>'uuid', a.gpu_uuid);
    INSERT INTO events (job_id, attempt_id, kind, reason, data)
    VALUES (j.id, a.id, 'gpu_marked', d->>'reason',
            jsonb_build_object('gpu_uuid', coalesce(d->'gpu'->>'uuid', a.gpu_uuid), 'mark', mark));
  END IF;
  IF cls = 'env_fault' AND a.gpu_uuid IS NOT NULL THEN
    INSERT INTO gpu_faults (gpu_uuid, job_id, attempt_id) VALUES (a.gpu_uuid, j.id, a.id);
  END IF;
  IF jsonb_typeof(d->'escalation') = 'object' THEN
    INSERT INTO escalations (job_id, attempt_id, trigger, summary, recommendation, report_markdown, report)
    VALUES (j.id, a.id, coalesce(d->'escalation'->>'trigger', 'unknown'), d->'escalation'->>'summary',
            d->'escalation'->>'recommendation', p_report->>'markdown', p_report->'json')
    RETURNING id INTO esc_id;
    INSERT INTO events (job_id, attempt_id, kind, reason, data)
    VALUES (j.id, a.id, 'escalated', d->'escalation'->>'summary',
            jsonb_build_object('escalation_id', esc_id, 'trigger', d->'escalation'->>'trigger'));
  END IF;
  IF new_state = 'queued' THEN PERFORM pg_notify('rung_jobs', j.id::text); END IF;
  RETURN jsonb_build_object('attempt_id', a.id, 'job_id', j.id, 'job_state', new_state,
                            'escalation_id', esc_id, 'decision', d);
END $$;

-- The reaper: running attempts whose lease expired become lost; their job is queued again
-- unchanged, or fails once lost_count exceeds recovery.max_lost (no escalation), or ends
-- cancelled when a cancel was requested. SKIP LOCKED makes it safe on several replicas.
-- Returns [{"attempt_id", "job_id", "job_state"}].
CREATE FUNCTION rung_reap(p_limit int) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  a attempts;
  j jobs;
  new_state text;
  why text;
  v_out jsonb := '[]';
BEGIN
  FOR a IN SELECT * FROM attempts WHERE state = 'running' AND lease_expires_at < now()
           ORDER BY id LIMIT p_limit FOR UPDATE SKIP LOCKED LOOP
    UPDATE attempts SET state = 'lost', outcome = 'lost', ended_at = now() WHERE id = a.id;
    SELECT * INTO j FROM jobs WHERE id = a.job_id FOR UPDATE;
    IF j.cancel_requested THEN
      new_state := 'cancelled';
      why := 'attempt ' || a.number || ' lost after a cancel request';
    ELSIF j.lost_count + 1 > coalesce((j.recovery->>'max_lost')::int, 3) THEN
      new_state := 'failed';
      why := 'attempt ' || a.number || ' lost (lease expired); lost ' || (j.lost_count + 1)
             || ' times, more than max_lost ' || coalesce((j.recovery->>'max_lost')::int, 3);
    ELSE
      new_state := 'queued';
      why := 'attempt ' || a.number || ' lost (lease expired); queued again unchanged';
    END IF;
    UPDATE jobs SET state = new_state, lost_count = lost_count + 1, updated_at = now(),
      finished_at = CASE WHEN new_state = 'queued' THEN NULL ELSE now() END,
      result = CASE WHEN new_state = 'queued' THEN result
                    ELSE jsonb_build_object('attempt_id', a.id, 'class', 'lost', 'reason', why) END,
      next_action = CASE WHEN new_state = 'queued' THEN why ELSE NULL END
    WHERE id = j.id;
    INSERT INTO events (job_id, attempt_id, kind, from_state, to_state, reason, data)
    VALUES (j.id, a.id, 'attempt_lost', 'running', 'lost', why,
            jsonb_build_object('number', a.number, 'worker_id', a.worker_id, 'gpu_uuid', a.gpu_uuid)),
           (j.id, a.id, 'job_' || new_state, j.state, new_state, why, NULL);
    IF new_state = 'queued' THEN PERFORM pg_notify('rung_jobs', j.id::text); END IF;
    v_out := v_out || jsonb_build_array(jsonb_build_object('attempt_id', a.id, 'job_id', j.id,
                                                       'job_state', new_state));
  END LOOP;
  RETURN v_out;
END $$;

-- Escalation transitions: open -> acknowledged -> resolved (open -> resolved too). Repeating a
-- transition is a no-op. Returns {"status": "ok"|"conflict", "escalation"} or NULL when missing.
CREATE FUNCTION rung_escalation_set(p_id bigint, p_state text, p_note text) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  e escalations;
BEGIN
  SELECT * INTO e FROM escalations WHERE id = p_id FOR UPDATE;
  IF NOT FOUND THEN RETURN NULL; END IF;
  IF p_state = 'acknowledged' AND e.state = 'resolved' THEN
    RETURN jsonb_build_object('status', 'conflict', 'escalation', rung_escalation_json(e, false));
  END IF;
  IF e.state <> p_state THEN
    UPDATE escalations SET state = p_state, note = coalesce(p_note, note), updated_at = now()
    WHERE id = p_id RETURNING * INTO e;
    INSERT INTO events (job_id, kind, from_state, to_state, reason, data)
    VALUES (e.job_id, 'escalation_' || p_state, NULL, p_state, p_note,
            jsonb_build_object('escalation_id', e.id));
  END IF;
  RETURN jsonb_build_object('status', 'ok', 'escalation', rung_escalation_json(e, true));
END $$;

-- An operator releases a GPU: back to ok, earlier env faults no longer count.
CREATE FUNCTION rung_gpu_release(p_uuid text) RETURNS jsonb LANGUAGE plpgsql AS $$
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
  PERFORM pg_notify('rung_jobs', '');
  RETURN rung_gpu_json(g);
END $$;
