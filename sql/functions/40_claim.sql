-- Claim for one GPU: what a claim round (41_claim_batch.sql) falls back to for a GPU that may run
-- none of the jobs the round locked.

-- Start an attempt of queued job p_job (locked by the caller) on the GPU. The attempt records its
-- config only when it is not the target. Returns {"status": "ok", "lease"}, or {"status": "none"}
-- when the job is no longer queued.
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
  -- its `leased` event is the attempt row itself (lease_event_id; the events view, migration 015)
  RETURN jsonb_build_object('status', 'ok', 'lease', jsonb_build_object(
    'attempt_id', a.id, 'job_id', j.id, 'number', a.number, 'token', a.token,
    'config', cfg, 'lease_seconds', p_lease_s, 'stall_timeout_s', j.recovery->'stall_timeout_s'));
END $$;

-- The room each owner with a limit (tokens.max_running, migration 020) has left now: {"name":
-- max_running - its running jobs} for every token with a limit, {} when no token has one (then
-- nothing else is read: the claim's cost without limits is one probe of a small table). Locks those
-- token rows (in id order) for the transaction, so that two claims, on one replica or two, cannot
-- both take an owner's last place: a claim round calls it before anything else it locks. Running
-- jobs are counted through their running attempts (attempts_one_running), O(running).
CREATE OR REPLACE FUNCTION rung_owner_room() RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  room jsonb;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM tokens t WHERE t.max_running IS NOT NULL) THEN
    RETURN '{}';
  END IF;
  PERFORM 1 FROM tokens t WHERE t.max_running IS NOT NULL ORDER BY t.id FOR NO KEY UPDATE;
  SELECT coalesce(jsonb_object_agg(t.name, t.max_running - coalesce(r.n, 0)), '{}') INTO room
  FROM tokens t
  LEFT JOIN (SELECT j.owner, count(*) AS n FROM attempts a JOIN jobs j ON j.id = a.job_id
             WHERE a.state = 'running' GROUP BY j.owner) r ON r.owner = t.name
  WHERE t.max_running IS NOT NULL;
  RETURN room;
END $$;

-- How many jobs of OWNER run now: its running attempts (attempts_one_running), O(running). What a
-- limit (tokens.max_running) is weighed against outside the claim: a job's placement, /metrics.
CREATE OR REPLACE FUNCTION rung_owner_running(p_owner text) RETURNS bigint LANGUAGE sql STABLE AS $$
  SELECT count(*) FROM attempts a JOIN jobs o ON o.id = a.job_id WHERE a.state = 'running' AND o.owner = p_owner
$$;

-- The owners a room (rung_owner_room's) leaves no place for: NULL when there is none.
CREATE OR REPLACE FUNCTION rung_owners_capped(room jsonb) RETURNS text[] LANGUAGE sql IMMUTABLE AS $$
  SELECT array_agg(e.key) FROM jsonb_each_text(room) e WHERE e.value::int <= 0
$$;

-- Claim the first eligible queued job for one GPU and start an attempt on it: the worker known and
-- online (touched), the GPU its own and not quarantined, the job not excluding this GPU or worker,
-- enough GPU memory, its owner below its max_running (p_capped: the owners at theirs; NULL: read
-- them now, rung_owner_room), and never a config identical to one that failed on this GPU since the
-- job's last retry (a retry says the GPU or host changed: sql/functions/22_job_ops.sql); SKIP LOCKED.
-- Returns {"status": "ok", "lease"} | {"status": "none" | "no_worker" | "no_gpu"}. (Its signature
-- gained p_capped in migration 020's release: the old one is dropped first.)
DROP FUNCTION IF EXISTS rung_claim(bigint, text, int, jsonb);
CREATE OR REPLACE FUNCTION rung_claim(p_worker bigint, p_gpu text, p_lease_s int, p_gpu_before jsonb,
                                      p_capped text[] DEFAULT NULL) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  w workers;
  g gpus;
  cand bigint;
  capped text[] := p_capped;
BEGIN
  IF capped IS NULL THEN
    capped := coalesce(rung_owners_capped(rung_owner_room()), '{}');
  END IF;
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
    AND c.owner <> ALL (capped)
    AND NOT coalesce(c.constraints->'exclude_gpus' ? p_gpu, false)
    AND NOT coalesce(c.constraints->'exclude_workers' @> to_jsonb(p_worker), false)
    AND NOT coalesce(c.constraints->'exclude_workers' ? p_worker::text, false)
    AND coalesce((c.constraints->>'min_gpu_memory_mib')::int, 0) <= g.memory_total_mib
    AND NOT EXISTS (SELECT 1 FROM attempts f
                    WHERE f.job_id = c.id AND f.gpu_uuid = p_gpu AND f.outcome = 'failed'
                      AND f.number > rung_budget_from(c.recovery_state)
                      AND f.config_hash = md5(coalesce(c.current_config, c.target_config)::text))
  ORDER BY c.priority, c.created_at, c.id
  LIMIT 1
  FOR UPDATE SKIP LOCKED;
  IF NOT FOUND THEN RETURN jsonb_build_object('status', 'none'); END IF;
  RETURN rung_claim_start(cand, p_worker, p_gpu, p_lease_s, p_gpu_before);
END $$;

-- How many queued jobs come before queued job J in claim order: (priority, created_at, id), the
-- order of rung_claim above and of rung_claim_batch's scan (41_claim_batch.sql), which must stay
-- the same. The placement of GET /v1/jobs/{id} (rung_job_placement) carries it as "ahead". A claim
-- passes over a job ahead that may not run on its GPU, and a later submit of a lower priority goes
-- before J, so it says where J stands now, not when it runs. A range of jobs_claim up to J's key:
-- O(jobs ahead), read for one job's page.
CREATE OR REPLACE FUNCTION rung_job_ahead(j jobs) RETURNS bigint
LANGUAGE sql STABLE AS $$
  SELECT count(*) FROM jobs c
  WHERE c.state = 'queued' AND (c.priority, c.created_at, c.id) < (j.priority, j.created_at, j.id)
$$;
