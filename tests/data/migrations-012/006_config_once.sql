-- Each job's AI Toolkit config (~3 KB) is stored once, as jobs.target_config, instead of being copied
-- into current_config at submit, into every attempt at claim and into the result at success; each
-- copy was a compressed, TOASTed write plus its WAL, the largest cost per attempt (docs/PERFORMANCE.md).
-- From here on a NULL means "the job's target_config":
--   jobs.current_config NULL      the next attempt runs the target (no rung applied, or scaled back up)
--   attempts.config NULL          the attempt ran the target
--   jobs.result without "config"  the run that succeeded ran the target
-- The JSON of the API (rung_attempt_json here, rung_job_json in 007, the lease) resolves them, so
-- clients see the same documents as before; the CTX sends them as NULL and rungd resolves them
-- (policy_ctx_resolve). Submits start storing NULL in 007, the CTX is rebuilt in 010.
-- Rows written before this migration keep their copies, which mean the same.

ALTER TABLE jobs ALTER COLUMN current_config DROP NOT NULL;
ALTER TABLE attempts ALTER COLUMN config DROP NOT NULL;

-- lz4 compresses the JSON that is still TOASTed (configs, FACTS, log tails, reports) several times
-- faster than the default pglz, where this server was built with it (new values only).
DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals)) THEN
    ALTER TABLE jobs ALTER COLUMN target_config SET COMPRESSION lz4,
                     ALTER COLUMN current_config SET COMPRESSION lz4,
                     ALTER COLUMN result SET COMPRESSION lz4;
    ALTER TABLE attempts ALTER COLUMN config SET COMPRESSION lz4,
                         ALTER COLUMN facts SET COMPRESSION lz4,
                         ALTER COLUMN log_tail SET COMPRESSION lz4;
    ALTER TABLE escalations ALTER COLUMN report SET COMPRESSION lz4,
                            ALTER COLUMN report_markdown SET COMPRESSION lz4;
  END IF;
END $$;

-- rung_submit (001) is no longer called: submits go through rung_submit_batch (004, 007).
DROP FUNCTION rung_submit(text, text, text, int, jsonb, jsonb, text, text);

-- What next_config becomes in jobs.current_config: NULL when it is the target again.
CREATE FUNCTION rung_config_or_null(p_config jsonb, p_target jsonb) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN p_config = p_target THEN NULL ELSE p_config END
$$;

CREATE OR REPLACE FUNCTION rung_attempt_json(a attempts) RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object(
    'id', a.id, 'job_id', a.job_id, 'number', a.number, 'worker_id', a.worker_id,
    'gpu_uuid', a.gpu_uuid, 'state', a.state, 'outcome', a.outcome, 'phase', a.phase,
    'step', a.step, 'total_steps', a.total_steps, 'memory_used_mib', a.memory_used_mib,
    'class', a.class, 'rule', a.rule, 'evidence', a.evidence, 'action', a.action, 'rung', a.rung,
    'changes', a.changes,
    'config', coalesce(a.config, (SELECT j.target_config FROM jobs j WHERE j.id = a.job_id)),
    'config_hash', a.config_hash,
    'facts', CASE WHEN a.facts IS NULL THEN NULL
                  ELSE a.facts || jsonb_build_object('log_tail', coalesce(a.log_tail, '[]')) END,
    'gpu_before', a.gpu_before, 'lease_expires_at', a.lease_expires_at,
    'last_heartbeat_at', a.last_heartbeat_at, 'started_at', a.started_at, 'ended_at', a.ended_at)
$$;

-- rung_claim_eligible (004), comparing against the job's resolved current config. plpgsql: its
-- plan is cached per connection, where a SQL function with a sub-query is planned per statement.
CREATE OR REPLACE FUNCTION rung_claim_eligible(p_job bigint, p_cons jsonb, p_worker bigint, p_gpu text,
                                               p_mem int) RETURNS boolean LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN NOT coalesce(p_cons->'exclude_gpus' ? p_gpu, false)
     AND NOT coalesce(p_cons->'exclude_workers' @> to_jsonb(p_worker), false)
     AND NOT coalesce(p_cons->'exclude_workers' ? p_worker::text, false)
     AND coalesce((p_cons->>'min_gpu_memory_mib')::int, 0) <= p_mem
     AND NOT EXISTS (SELECT 1 FROM attempts f JOIN jobs c ON c.id = f.job_id
                     WHERE f.job_id = p_job AND f.gpu_uuid = p_gpu AND f.outcome = 'failed'
                       AND f.config_hash = md5(coalesce(c.current_config, c.target_config)::text));
END $$;

-- rung_claim_start (004): the attempt records its config only when it is not the target.
CREATE OR REPLACE FUNCTION rung_claim_start(p_job bigint, p_worker bigint, p_gpu text, p_lease_s int,
                                            p_gpu_before jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  j jobs;
  a attempts;
  cfg jsonb;
BEGIN
  UPDATE jobs SET state = 'running', attempts_count = attempts_count + 1, updated_at = now(),
                  next_action = NULL
  WHERE id = p_job AND state = 'queued'
  RETURNING * INTO j;
  IF NOT FOUND THEN RETURN jsonb_build_object('status', 'none'); END IF;
  cfg := coalesce(j.current_config, j.target_config);
  INSERT INTO attempts (job_id, number, worker_id, gpu_uuid, config, config_hash, token,
                        lease_expires_at, gpu_before, phase)
  VALUES (j.id, j.attempts_count, p_worker, p_gpu, j.current_config, md5(cfg::text),
          replace(gen_random_uuid()::text, '-', '') || replace(gen_random_uuid()::text, '-', ''),
          now() + make_interval(secs => p_lease_s), p_gpu_before, 'start')
  RETURNING * INTO a;
  INSERT INTO events (job_id, attempt_id, kind, from_state, to_state, reason, data)
  VALUES (j.id, a.id, 'leased', 'queued', 'running', 'attempt ' || a.number || ' started',
          jsonb_build_object('number', a.number, 'worker_id', p_worker, 'gpu_uuid', p_gpu,
                             'config_hash', a.config_hash));
  RETURN jsonb_build_object('status', 'ok', 'lease', jsonb_build_object(
    'attempt_id', a.id, 'job_id', j.id, 'number', a.number, 'token', a.token,
    'config', cfg, 'lease_seconds', p_lease_s));
END $$;

-- Claim for one GPU (001): the candidate scan of rung_claim_eligible, then rung_claim_start.
CREATE OR REPLACE FUNCTION rung_claim(p_worker bigint, p_gpu text, p_lease_s int, p_gpu_before jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  w workers;
  g gpus;
  cand bigint;
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
  SELECT c.id INTO cand FROM jobs c
  WHERE c.state = 'queued'
    AND NOT coalesce(c.constraints->'exclude_gpus' ? p_gpu, false)
    AND NOT coalesce(c.constraints->'exclude_workers' @> to_jsonb(p_worker), false)
    AND NOT coalesce(c.constraints->'exclude_workers' ? p_worker::text, false)
    AND coalesce((c.constraints->>'min_gpu_memory_mib')::int, 0) <= g.memory_total_mib
    AND NOT EXISTS (SELECT 1 FROM attempts f
                    WHERE f.job_id = c.id AND f.gpu_uuid = p_gpu AND f.outcome = 'failed'
                      AND f.config_hash = md5(coalesce(c.current_config, c.target_config)::text))
  ORDER BY c.priority, c.created_at, c.id
  LIMIT 1
  FOR UPDATE SKIP LOCKED;
  IF NOT FOUND THEN RETURN jsonb_build_object('status', 'none'); END IF;
  RETURN rung_claim_start(cand, p_worker, p_gpu, p_lease_s, p_gpu_before);
END $$;

-- Apply a DECISION (001). The job's current config becomes next_config, or NULL when that is the
-- target again; the result names the config that succeeded only when it was not the target. Reads
-- back only the columns it uses: a row variable would de-TOAST every config and FACTS it holds.
CREATE OR REPLACE FUNCTION rung_finish_apply(p_attempt bigint, p_token text, p_facts jsonb, p_decision jsonb,
                                             p_report jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  a_id bigint;
  a_job bigint;
  a_number int;
  a_outcome text;
  a_gpu text;
  a_config jsonb;
  j_state text;
  j_cancel boolean;
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
  RETURNING id, job_id, number, outcome, gpu_uuid, config
  INTO a_id, a_job, a_number, a_outcome, a_gpu, a_config;
  IF NOT FOUND THEN RETURN NULL; END IF;
  SELECT state, cancel_requested INTO j_state, j_cancel FROM jobs WHERE id = a_job FOR UPDATE;
  IF j_cancel AND new_state = 'queued' THEN
    new_state := 'cancelled';
    d := d || jsonb_build_object('job_state', 'cancelled', 'next_config', NULL,
                                 'reason', 'cancelled: ' || coalesce(d->>'reason', ''));
  END IF;
  IF new_state NOT IN ('queued', 'succeeded', 'failed', 'cancelled') THEN
    RAISE EXCEPTION 'decision job_state % is not a job state', new_state;
  END IF;
  UPDATE jobs SET
    state = new_state,
    current_config = CASE WHEN jsonb_typeof(d->'next_config') = 'object'
                          THEN rung_config_or_null(d->'next_config', target_config)
                          ELSE current_config END,
    constraints = CASE WHEN jsonb_typeof(d->'constraints') = 'object'
                       THEN rung_merge_constraints(constraints, d->'constraints') ELSE constraints END,
    recovery_state = CASE WHEN jsonb_typeof(d->'recovery_state') = 'object' THEN d->'recovery_state'
                          ELSE recovery_state END,
    result = CASE WHEN new_state = 'queued' THEN result
                  ELSE jsonb_build_object('attempt_id', a_id, 'class', cls, 'rule', d->>'rule',
                                          'reason', d->>'reason')
                       || CASE WHEN new_state = 'succeeded' AND a_config IS NULL THEN '{}'::jsonb
                               ELSE jsonb_build_object('config', CASE WHEN new_state = 'succeeded' THEN a_config END) END
                       || CASE WHEN jsonb_typeof(d->'result') = 'object' THEN d->'result' ELSE '{}' END END,
    finished_at = CASE WHEN new_state = 'queued' THEN NULL ELSE now() END,
    next_action = CASE WHEN coalesce(d->'recovery_state'->>'next_action', '') <> ''
                         THEN d->'recovery_state'->>'next_action'
                       WHEN jsonb_typeof(d->'escalation') = 'object' THEN d->'escalation'->>'recommendation'
                       WHEN new_state = 'queued' THEN d->>'reason' ELSE NULL END,
    updated_at = now()
  WHERE id = a_job;
  INSERT INTO events (job_id, attempt_id, kind, from_state, to_state, reason, data)
  VALUES (a_job, a_id, 'attempt_ended', 'running', a_outcome, d->>'reason',
          jsonb_build_object('number', a_number, 'class', cls, 'rule', d->>'rule',
                             'evidence', d->'evidence', 'action', d->>'action', 'rung', d->>'rung',
                             'changes', d->'changes')),
         (a_job, a_id, 'job_' || new_state, j_state, new_state, d->>'reason', NULL);
  IF jsonb_typeof(d->'gpu') = 'object' AND a_gpu IS NOT NULL THEN
    mark := d->'gpu'->>'mark';
    UPDATE gpus SET state = CASE WHEN mark = 'quarantine' THEN 'quarantined'
                                 WHEN state = 'quarantined' THEN state ELSE 'suspect' END,
                    reason = d->>'reason', updated_at = now()
    WHERE uuid = coalesce(d->'gpu'->>'uuid', a_gpu);
    INSERT INTO events (job_id, attempt_id, kind, reason, data)
    VALUES (a_job, a_id, 'gpu_marked', d->>'reason',
            jsonb_build_object('gpu_uuid', coalesce(d->'gpu'->>'uuid', a_gpu), 'mark', mark));
  END IF;
  IF cls = 'env_fault' AND a_gpu IS NOT NULL THEN
    INSERT INTO gpu_faults (gpu_uuid, job_id, attempt_id) VALUES (a_gpu, a_job, a_id);
  END IF;
  IF jsonb_typeof(d->'escalation') = 'object' THEN
    INSERT INTO escalations (job_id, attempt_id, trigger, summary, recommendation, report_markdown, report)
    VALUES (a_job, a_id, coalesce(d->'escalation'->>'trigger', 'unknown'), d->'escalation'->>'summary',
            d->'escalation'->>'recommendation', p_report->>'markdown', p_report->'json')
    RETURNING id INTO esc_id;
    INSERT INTO events (job_id, attempt_id, kind, reason, data)
    VALUES (a_job, a_id, 'escalated', d->'escalation'->>'summary',
            jsonb_build_object('escalation_id', esc_id, 'trigger', d->'escalation'->>'trigger'));
  END IF;
  IF new_state = 'queued' THEN PERFORM pg_notify('rung_jobs', a_job::text); END IF;
  RETURN jsonb_build_object('attempt_id', a_id, 'job_id', a_job, 'job_state', new_state,
                            'escalation_id', esc_id, 'decision', d);
END $$;
