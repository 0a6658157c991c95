-- Claim for one GPU: what a claim round (41_claim_batch.sql) falls back to for a GPU that may run
-- none of the jobs the round locked.

-- Migration 026 gave the claim's helpers a pool argument. Their signatures without it are the release
-- before's: nothing of this release calls them (its rung_claim_batch is a wrapper of rung_claim_round,
-- 41_claim_batch.sql, which reads a pool at a time), and a rungd rolled back to that release creates
-- them again at its start. (An overload left beside them with a defaulted argument would make that
-- release's calls ambiguous: 30_register.sql.)
DROP FUNCTION IF EXISTS rung_queued_owners(text[]);
DROP FUNCTION IF EXISTS rung_queue_head(text[], int);
DROP FUNCTION IF EXISTS rung_queue_head(text[], int, jsonb);
DROP FUNCTION IF EXISTS rung_claim_walk(text[], jsonb, bigint[], bigint, text, int);
DROP FUNCTION IF EXISTS rung_claim_pick(text[], jsonb, bigint[], bigint, text, int);

-- Start an attempt of queued job p_job (locked by the caller) on the GPU. The attempt records its
-- config only when it is not the target. Returns {"status": "ok", "lease"}, or {"status": "none"}
-- when the job is no longer queued, or when its start deadline (migration 039) has passed before it
-- started: the deadline pass cancels it within the second (rung_start_deadline_due), none starts late.
CREATE OR REPLACE FUNCTION rung_claim_start(p_job bigint, p_worker bigint, p_gpu text, p_lease_s int,
                                            p_gpu_before jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  j jobs;
  a attempts;
  cfg jsonb;
BEGIN
  UPDATE jobs SET state = 'running', attempts_count = attempts_count + 1, updated_at = now(),
                  next_action = NULL,
                  -- a checkpoint hold ends with the lease (rung_job_allows)
                  constraints = CASE WHEN constraints ? 'hold' THEN constraints - 'hold' ELSE constraints END
  WHERE id = p_job AND state = 'queued' AND (start_by IS NULL OR start_by > now() OR attempts_count > 0)
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

-- The advisory lock that orders a claim after a limit's change (rung_owner_room, rung_token_set_limit
-- in 90_tokens.sql): every claim holds it shared for its transaction, a change of a limit takes it
-- alone, so a claim either ran before the change committed or reads the new limit.
CREATE OR REPLACE FUNCTION rung_owner_limits_lock() RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
  SELECT 7240531::bigint
$$;

-- How many jobs each owner runs now: {"owner": n} for the owners with a running attempt
-- (attempts_one_running), O(running). What the owners' room and a fair share weigh.
CREATE OR REPLACE FUNCTION rung_owners_running() RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT coalesce(jsonb_object_agg(r.owner, r.n), '{}')
  FROM (SELECT j.owner, count(*) AS n FROM attempts a JOIN jobs j ON j.id = a.job_id
        WHERE a.state = 'running' GROUP BY j.owner) r
$$;

-- How many jobs of pool P_POOL of owner P_OWNER run now (wherever they run: a borrower's host too),
-- what its limit in that pool counts (tokens.pool_limits, migration 034): O(running).
CREATE OR REPLACE FUNCTION rung_owner_running_in(p_owner text, p_pool text) RETURNS bigint LANGUAGE sql STABLE AS $$
  SELECT count(*) FROM attempts a JOIN jobs o ON o.id = a.job_id
  WHERE a.state = 'running' AND o.owner = p_owner AND o.pool = p_pool
$$;

-- Who runs and waits, per owner (a token's name: a team): [{"owner", "queued", "running",
-- "scheduled", "max_running": its token's limit or null, "pool_limits": [{"pool", "max_running",
-- "running", "queued"}] for each pool its token limits (migration 034), [] for none, "quota": its
-- GPU-hour quota (rung_owner_quota, migration 035) or null, "pool_quotas": its quotas per pool
-- (rung_owner_pool_quotas, 037), [] for none}] for every
-- owner with a queued, running or scheduled job and every live token with a limit, the busiest
-- first (running, then queued, then scheduled, then name). P_QUEUED: the queued jobs per owner,
-- {"owner": n} (GET /metrics reads the queue once for them and its depth); NULL: read them here, by
-- jobs_claim_owner (O(queue)). Running:
-- rung_owners_running, O(running). Scheduled (migration 025: jobs waiting for their start time, which
-- no claim reads): O(scheduled). GET /v1/owners, rungctl owners, the web GPUs page and /metrics'
-- per-owner series.
CREATE OR REPLACE FUNCTION rung_owners_summary(p_queued jsonb DEFAULT NULL) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
  queued jsonb := p_queued;
  running jsonb := rung_owners_running();
  scheduled jsonb;
BEGIN
  IF queued IS NULL THEN
    SELECT coalesce(jsonb_object_agg(q.owner, q.n), '{}') INTO queued
    FROM (SELECT c.owner, count(*) AS n FROM jobs c WHERE c.state = 'queued' GROUP BY c.owner) q;
  END IF;
  SELECT coalesce(jsonb_object_agg(q.owner, q.n), '{}') INTO scheduled
  FROM (SELECT c.owner, count(*) AS n FROM jobs c WHERE c.state = 'scheduled' GROUP BY c.owner) q;
  RETURN (SELECT coalesce(jsonb_agg(jsonb_build_object('owner', o.owner, 'queued', o.queued, 'running', o.running,
                                                       'scheduled', o.scheduled, 'max_running', t.max_running,
                                                       'pool_limits', coalesce(pl.list, '[]'),
                                                       'quota', rung_owner_quota(o.owner),
                                                       'pool_quotas', coalesce(rung_owner_pool_quotas(o.owner), '[]'))
                                    ORDER BY o.running DESC, o.queued DESC, o.scheduled DESC, o.owner), '[]')
          FROM (SELECT k.owner, coalesce((queued->>k.owner)::int, 0) AS queued,
                       coalesce((running->>k.owner)::int, 0) AS running,
                       coalesce((scheduled->>k.owner)::int, 0) AS scheduled
                FROM (SELECT jsonb_object_keys(queued) UNION SELECT jsonb_object_keys(running)
                      UNION SELECT jsonb_object_keys(scheduled)
                      UNION SELECT l.name FROM tokens l
                      WHERE (l.max_running IS NOT NULL OR l.pool_limits IS NOT NULL OR l.gpu_hours IS NOT NULL
                             OR l.pool_gpu_hours IS NOT NULL)
                        AND l.revoked_at IS NULL) k(owner)) o
          LEFT JOIN tokens t ON t.name = o.owner
          -- its limits per pool: queued jobs by jobs_claim_owner (pool, owner), O(its queue there)
          LEFT JOIN LATERAL (SELECT jsonb_agg(jsonb_build_object(
                                      'pool', l.key, 'max_running', l.value::int,
                                      'running', rung_owner_running_in(o.owner, l.key),
                                      'queued', (SELECT count(*) FROM jobs c
                                                 WHERE c.state = 'queued' AND c.pool = l.key AND c.owner = o.owner))
                                    ORDER BY l.key) AS list
                             FROM jsonb_each_text(t.pool_limits) l) pl ON true);
END $$;

-- The room each owner with a limit has left now, read without locks: {"name": max_running - its
-- running jobs} for every token with a max_running (migration 020), and {"name/POOL": N - its
-- running jobs of pool POOL} for each pool of its pool_limits (migration 034; '/' is in no token or
-- pool name, so the keys cannot meet); {} when no token has a limit (then nothing else is read). A
-- job of pool POOL may start while both its owner's keys, where present, are above 0
-- (rung_room_open); starting it spends one of each (rung_room_take). Running jobs are counted
-- through their running attempts (attempts_one_running), O(running); per (owner, pool) once more,
-- only when some token has a per-pool limit. An owner over its GPU-hour quota (migration 035:
-- quota_use.over, read by rung_quota_pass, 45_quota.sql) has no room at all: its key is 0 (or what
-- max_running left, when below); one over its quota in a pool (037: quota_use.pools_over) none in that
-- pool: its "name/POOL" key is 0 (or what that pool's limit left). What the preemption pass weighs (44_preempt.sql); the claim takes it under locks
-- (rung_owner_room, below).
CREATE OR REPLACE FUNCTION rung_owner_room_now() RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
DECLARE
  room jsonb;
  running jsonb;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM tokens t
                 WHERE t.max_running IS NOT NULL OR t.pool_limits IS NOT NULL OR t.gpu_hours IS NOT NULL OR t.pool_gpu_hours IS NOT NULL) THEN
    RETURN '{}';
  END IF;
  running := rung_owners_running();
  SELECT coalesce(jsonb_object_agg(t.name, t.max_running - coalesce((running->>t.name)::int, 0)), '{}') INTO room
  FROM tokens t
  WHERE t.max_running IS NOT NULL;
  IF EXISTS (SELECT 1 FROM tokens t WHERE t.pool_limits IS NOT NULL) THEN
    -- the running jobs per (owner, pool), read once for every limit (one pass over the running attempts,
    -- not one per limit: this runs at every claim round)
    SELECT room || coalesce(jsonb_object_agg(t.name || '/' || l.key, l.value::int - coalesce(r.n, 0)), '{}')
    INTO room
    FROM tokens t CROSS JOIN LATERAL jsonb_each_text(t.pool_limits) l
    LEFT JOIN (SELECT j.owner, j.pool, count(*) AS n FROM attempts a JOIN jobs j ON j.id = a.job_id
               WHERE a.state = 'running' GROUP BY j.owner, j.pool) r ON r.owner = t.name AND r.pool = l.key
    WHERE t.pool_limits IS NOT NULL;
  END IF;
  IF EXISTS (SELECT 1 FROM quota_use u WHERE u.over) THEN
    SELECT room || coalesce(jsonb_object_agg(t.name, least(coalesce((room->>t.name)::int, 0), 0)), '{}') INTO room
    FROM quota_use u JOIN tokens t ON t.id = u.token_id
    WHERE u.over AND t.gpu_hours IS NOT NULL;
  END IF;
  IF EXISTS (SELECT 1 FROM quota_use u WHERE u.pools_over <> '{}') THEN
    -- over its quota in a pool (migration 037): no room in that pool
    SELECT room || coalesce(jsonb_object_agg(t.name || '/' || p.pool,
                                             least(coalesce((room->>(t.name || '/' || p.pool))::int, 0), 0)), '{}')
    INTO room
    FROM quota_use u JOIN tokens t ON t.id = u.token_id CROSS JOIN LATERAL unnest(u.pools_over) p(pool)
    WHERE u.pools_over <> '{}' AND t.pool_gpu_hours ? p.pool;
  END IF;
  RETURN room;
END $$;

-- rung_owner_room_now under the claim's locks: the room each owner with a limit has left, locking
-- those token rows (in id order) for the transaction, so that two claims, on one replica or two,
-- cannot both take an owner's last place: a claim round calls it before anything else it locks. It
-- first takes rung_owner_limits_lock shared, so that a token's first limit, whose row no claim has
-- locked, cannot be set while a claim that read no limit for it is still under way (the change
-- waits for it). {} when no token has a limit: the claim's cost without limits is one probe of a
-- small table.
CREATE OR REPLACE FUNCTION rung_owner_room() RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock_shared(rung_owner_limits_lock());
  IF NOT EXISTS (SELECT 1 FROM tokens t
                 WHERE t.max_running IS NOT NULL OR t.pool_limits IS NOT NULL OR t.gpu_hours IS NOT NULL OR t.pool_gpu_hours IS NOT NULL) THEN
    RETURN '{}';
  END IF;
  PERFORM 1 FROM tokens t WHERE t.max_running IS NOT NULL OR t.pool_limits IS NOT NULL OR t.gpu_hours IS NOT NULL OR t.pool_gpu_hours IS NOT NULL
  ORDER BY t.id FOR NO KEY UPDATE;
  RETURN rung_owner_room_now();
END $$;

-- Whether a room (rung_owner_room's) leaves P_OWNER a place for a job of pool P_POOL: neither its
-- limit over every pool nor its limit in that pool, where it has them, is spent.
CREATE OR REPLACE FUNCTION rung_room_open(room jsonb, p_owner text, p_pool text) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce((room->>p_owner)::int, 1) > 0 AND coalesce((room->>(p_owner || '/' || p_pool))::int, 1) > 0
$$;

-- ROOM once a job of P_OWNER of pool P_POOL has been given a GPU: one place fewer under each of the
-- owner's limits that counts it (rung_room_open's two keys).
CREATE OR REPLACE FUNCTION rung_room_take(room jsonb, p_owner text, p_pool text) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN room = '{}' THEN room
              ELSE room || coalesce((SELECT jsonb_object_agg(e.key, e.value::int - 1) FROM jsonb_each_text(room) e
                                     WHERE e.key IN (p_owner, p_owner || '/' || p_pool)), '{}') END
$$;

-- How many jobs of OWNER run now: its running attempts (attempts_one_running), O(running). What a
-- limit (tokens.max_running) is weighed against outside the claim: a job's placement, /metrics.
CREATE OR REPLACE FUNCTION rung_owner_running(p_owner text) RETURNS bigint LANGUAGE sql STABLE AS $$
  SELECT count(*) FROM attempts a JOIN jobs o ON o.id = a.job_id WHERE a.state = 'running' AND o.owner = p_owner
$$;

-- The owners a room (rung_owner_room's) leaves no place for in pool P_POOL, by their limit over every
-- pool or by their limit in that pool (rung_room_open): NULL when there is none. A claim's scans of
-- a pool's queue pass over their jobs.
CREATE OR REPLACE FUNCTION rung_owners_capped_in(room jsonb, p_pool text) RETURNS text[] LANGUAGE sql IMMUTABLE AS $$
  SELECT array_agg(DISTINCT split_part(e.key, '/', 1)) FROM jsonb_each_text(room) e
  WHERE e.value::int <= 0 AND (position('/' IN e.key) = 0 OR split_part(e.key, '/', 2) = p_pool)
$$;
-- (rung_owners_capped(room), before migration 034, read every key as an owner)
DROP FUNCTION IF EXISTS rung_owners_capped(jsonb);

-- The owners with queued jobs in pool P_POOL, but for those in P_CAPPED: a skip scan of
-- jobs_claim_owner (migrations 021, 026), one index probe per owner with queued jobs there, however
-- many jobs each has queued.
CREATE OR REPLACE FUNCTION rung_queued_owners(p_capped text[], p_pool text) RETURNS text[] LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN (WITH RECURSIVE o(owner) AS (
            (SELECT c.owner FROM jobs c WHERE c.state = 'queued' AND c.pool = p_pool ORDER BY c.owner LIMIT 1)
            UNION ALL
            SELECT (SELECT c.owner FROM jobs c WHERE c.state = 'queued' AND c.pool = p_pool AND c.owner > o.owner
                    ORDER BY c.owner LIMIT 1)
            FROM o WHERE o.owner IS NOT NULL)
          SELECT coalesce(array_agg(o.owner), '{}') FROM o WHERE o.owner IS NOT NULL AND o.owner <> ALL (p_capped));
END $$;

-- The first P_N queued jobs of pool P_POOL whose owner is not in P_CAPPED, not locked: the first P_N of each other
-- owner's queue (jobs_claim_owner), merged. P_RUNNING NULL: in claim order, what a claim reads while
-- some owner is at its limit, instead of passing over that owner's queued jobs in jobs_claim. A fair
-- share (rungd --fair-share) gives the jobs running now per owner (rung_owners_running): within a
-- priority, an owner's k-th queued job (0 first) takes the place "its running jobs + k", so the next
-- GPU goes to the owner that runs the fewest, oldest job first, ties by age. O(owners with queued
-- jobs x P_N), not O(the jobs ahead); each owner's lookup is planned for that owner
-- (force_custom_plan; its callers plan generically).
CREATE OR REPLACE FUNCTION rung_queue_head(p_capped text[], p_n int, p_running jsonb, p_pool text) RETURNS bigint[]
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_custom_plan AS $$
DECLARE
  o text;
  a_id bigint[] := '{}';
  a_pri int[] := '{}';
  a_at timestamptz[] := '{}';
  a_place bigint[] := '{}';
BEGIN
  -- one statement per owner, planned for that owner: planned for "some owner" (a lateral join), the
  -- lookup read jobs_claim in claim order, past another owner's 100,000 jobs (60-100 ms a round)
  FOREACH o IN ARRAY rung_queued_owners(p_capped, p_pool) LOOP
    SELECT a_id || coalesce(array_agg(y.id), '{}'), a_pri || coalesce(array_agg(y.priority), '{}'),
           a_at || coalesce(array_agg(y.created_at), '{}'),
           a_place || coalesce(array_agg(CASE WHEN p_running IS NULL THEN 0
                                              ELSE coalesce((p_running->>o)::int, 0) + y.k END), '{}')
    INTO a_id, a_pri, a_at, a_place
    FROM (SELECT c.id, c.priority, c.created_at,
                 row_number() OVER (PARTITION BY c.priority ORDER BY c.created_at, c.id) - 1 AS k
          FROM (SELECT c.id, c.priority, c.created_at FROM jobs c
                WHERE c.state = 'queued' AND c.pool = p_pool AND c.owner = o
                ORDER BY c.priority, c.created_at, c.id LIMIT p_n) c) y;
  END LOOP;
  RETURN (SELECT coalesce(array_agg(x.id ORDER BY x.pri, x.place, x.at, x.id), '{}')
          FROM (SELECT * FROM unnest(a_id, a_pri, a_at, a_place) AS x(id, pri, at, place)
                ORDER BY x.pri, x.place, x.at, x.id LIMIT p_n) x);
END $$;

-- Whether constraints P_CONS hold their job for a worker other than P_WORKER now: a checkpoint hold
-- ("hold" {"worker_id", "until"}, rung_job_allows) not yet past (P_WORKER 0, no worker's id: whether a
-- hold is in force at all). The one place the rule is written
-- in SQL (the claim round's in-memory check, 41_claim_batch.sql, calls it too).
CREATE OR REPLACE FUNCTION rung_held_elsewhere(p_cons jsonb, p_worker bigint) RETURNS boolean
LANGUAGE sql STABLE AS $$
  SELECT coalesce((p_cons->'hold'->>'worker_id')::bigint <> p_worker
                  AND (p_cons->'hold'->>'until')::timestamptz > now(), false)
$$;

-- Whether a job with constraints P_CONS may run on GPU P_GPU (P_MEM MiB) of worker P_WORKER: it
-- excludes neither and asks no more memory than the GPU has, and it is not held for another worker
-- (the checkpoint hold, recovery/resume.h: "hold" {"worker_id", "until"}, written by a finish that
-- queued the job again, rung_merge_constraints, and dropped by the lease; past its "until" it holds
-- nothing, and rungd's parked long-polls retry within --poll-fallback-ms). One expression, STABLE as
-- to_jsonb and now() are, so that the planner inlines it into rung_claim's scans (a call per queued
-- job read cost three times as much); rung_claim_batch (41_claim_batch.sql) checks the same in
-- memory.
CREATE OR REPLACE FUNCTION rung_job_allows(p_cons jsonb, p_worker bigint, p_gpu text, p_mem int) RETURNS boolean
LANGUAGE sql STABLE AS $$
  SELECT NOT coalesce(p_cons->'exclude_gpus' ? p_gpu, false)
     AND NOT coalesce(p_cons->'exclude_workers' @> to_jsonb(p_worker), false)
     AND NOT coalesce(p_cons->'exclude_workers' ? p_worker::text, false)
     AND coalesce((p_cons->>'min_gpu_memory_mib')::int, 0) <= p_mem
     AND NOT rung_held_elsewhere(p_cons, p_worker)
$$;

-- rung_claim_pick's walk beyond its head: the job of pool p_pool, of an owner not in p_capped, not
-- in p_passed, that may run on GPU p_gpu (p_mem MiB) of worker p_worker, by priority, then (fair share, p_running)
-- the owner running the fewest, then age, not locked, or NULL. Each owner's first job that may run
-- here among its first 1,024 gives the best so far; then each owner's queue is walked
-- (jobs_claim_owner) for a better one, stopping at that best (bounds on jobs_claim_owner's leading
-- columns: a row comparison would not stop the scan; past an owner's first 1,024 jobs a fair share
-- weighs age only). So an owner whose queue this GPU may not run is read to its end only when no
-- owner has a job it may run near the front. Its statements are planned for each call's values
-- (force_custom_plan): planned once for any owner, a lookup in one owner's queue read jobs_claim in
-- claim order instead of jobs_claim_owner, past every other owner's jobs (83 ms a claim with 100,000
-- of another owner's jobs in front).
CREATE OR REPLACE FUNCTION rung_claim_walk(p_capped text[], p_running jsonb, p_passed bigint[], p_worker bigint,
                                           p_gpu text, p_mem int, p_pool text) RETURNS bigint
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_custom_plan AS $$
DECLARE
  cand bigint;
  owners text[];
  passed bigint[] := coalesce(p_passed, '{}');
  o text;
  o_running int;
  found_id bigint;
  found_p int;
  found_at timestamptz;
  best_p int;              -- the best job so far (cand): its priority, age, and its owner's running jobs
  best_at timestamptz;
  best_running int;
BEGIN
  -- the owners by their first queued job
  SELECT coalesce(array_agg(u.owner ORDER BY f.priority, coalesce((p_running->>u.owner)::int, 0), f.created_at, f.id),
                  '{}')
  INTO owners
  FROM unnest(rung_queued_owners(p_capped, p_pool)) AS u(owner)
  CROSS JOIN LATERAL (SELECT c.priority, c.created_at, c.id FROM jobs c
                      WHERE c.state = 'queued' AND c.pool = p_pool AND c.owner = u.owner
                      ORDER BY c.priority, c.created_at, c.id LIMIT 1) f;
  FOREACH o IN ARRAY owners LOOP
    o_running := coalesce((p_running->>o)::int, 0);
    SELECT y.id, y.priority, y.created_at INTO found_id, found_p, found_at
    FROM (SELECT c.id, c.priority, c.created_at, c.constraints FROM jobs c
          WHERE c.state = 'queued' AND c.pool = p_pool AND c.owner = o
          ORDER BY c.priority, c.created_at, c.id LIMIT 1024) y
    WHERE y.id <> ALL (passed) AND rung_job_allows(y.constraints, p_worker, p_gpu, p_mem)
    ORDER BY y.priority, y.created_at, y.id
    LIMIT 1;
    IF FOUND AND (cand IS NULL OR (found_p, o_running, found_at, found_id) < (best_p, best_running, best_at, cand)) THEN
      cand := found_id; best_p := found_p; best_at := found_at; best_running := o_running;
    END IF;
  END LOOP;
  FOREACH o IN ARRAY owners LOOP
    o_running := coalesce((p_running->>o)::int, 0);
    -- a job of a better priority than the best so far (before one is found: any); the bound is
    -- on jobs_claim_owner's second column, after the owner's equality, so the walk stops at it
    SELECT c.id, c.priority, c.created_at INTO found_id, found_p, found_at FROM jobs c
    WHERE c.state = 'queued' AND c.pool = p_pool AND c.owner = o
      AND c.priority < CASE WHEN cand IS NULL THEN 2147483647 ELSE best_p END
      AND c.id <> ALL (passed) AND rung_job_allows(c.constraints, p_worker, p_gpu, p_mem)
    ORDER BY c.priority, c.created_at, c.id
    LIMIT 1;
    IF NOT FOUND AND cand IS NOT NULL AND o_running <= best_running THEN
      -- at the best's priority: an older job, the age bounded after the owner's and the
      -- priority's equalities (an owner running fewer is weighed so only beyond its first 1,024
      -- jobs, the pass above: past them, by age)
      SELECT c.id, c.priority, c.created_at INTO found_id, found_p, found_at FROM jobs c
      WHERE c.state = 'queued' AND c.pool = p_pool AND c.owner = o AND c.priority = best_p AND c.created_at <= best_at
        AND (c.created_at, c.id) < (best_at, cand)
        AND c.id <> ALL (passed) AND rung_job_allows(c.constraints, p_worker, p_gpu, p_mem)
      ORDER BY c.created_at, c.id
      LIMIT 1;
    END IF;
    IF FOUND THEN
      cand := found_id; best_p := found_p; best_at := found_at; best_running := o_running;
    END IF;
  END LOOP;
  RETURN cand;
END $$;

-- rung_claim's pick while some owner is capped or with a fair share (p_running), below: the job of
-- pool p_pool, of an owner not in p_capped, not in p_skip, that may run on GPU p_gpu (p_mem MiB) of worker p_worker,
-- locked (FOR UPDATE SKIP LOCKED), or NULL.
-- The capped owners' queued jobs are not read. Without a fair share the first 64 queued jobs of the
-- other owners in claim order (rung_queue_head) are tried first: the first of them that may run here
-- is the answer, as none before it may. With one, or when none of them may, rung_claim_walk. The
-- config check (the job's failed attempts) is made for the job found, not for each job read; the job
-- is read again under its lock.
CREATE OR REPLACE FUNCTION rung_claim_pick(p_capped text[], p_running jsonb, p_skip bigint[], p_worker bigint,
                                           p_gpu text, p_mem int, p_pool text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  cand bigint;
  head bigint[];
  passed bigint[] := coalesce(p_skip, '{}'); -- jobs not to take: the round's, and those another holds
BEGIN
  IF p_running IS NULL THEN
    head := rung_queue_head(p_capped, 64, NULL, p_pool);
  END IF;
  LOOP
    cand := NULL;
    -- the head, in claim order: by primary key (`= ANY`: one index scan of jobs_pkey whatever the
    -- statistics say; `IS TRUE`: not through jobs_claim, see 41_claim_batch.sql)
    SELECT c.id INTO cand
    FROM jobs c
    WHERE c.id = ANY (head) AND (c.state = 'queued') IS TRUE AND c.id <> ALL (passed)
      AND rung_job_allows(c.constraints, p_worker, p_gpu, p_mem)
    ORDER BY array_position(head, c.id)
    LIMIT 1;
    IF cand IS NULL AND (p_running IS NOT NULL OR cardinality(head) >= 64) THEN
      cand := rung_claim_walk(p_capped, p_running, passed, p_worker, p_gpu, p_mem, p_pool);
    END IF;
    EXIT WHEN cand IS NULL;
    IF EXISTS (SELECT 1 FROM jobs c JOIN attempts f ON f.job_id = c.id
               WHERE c.id = cand AND c.attempts_count > 0 AND f.gpu_uuid = p_gpu AND f.outcome = 'failed'
                 AND f.number > rung_budget_from(c.recovery_state)
                 AND f.config_hash = md5(coalesce(c.current_config, c.target_config)::text)) THEN
      passed := passed || cand; -- its config failed on this GPU since its last retry: not here
      CONTINUE;
    END IF;
    -- what may have changed since it was read (a job handed back for a bigger GPU, a job moved to
    -- another pool: rung_set_pool) is read again under the lock
    PERFORM 1 FROM jobs c
    WHERE c.id = cand AND (c.state = 'queued' AND c.pool = p_pool) IS TRUE
      AND rung_job_allows(c.constraints, p_worker, p_gpu, p_mem)
    FOR UPDATE SKIP LOCKED;
    EXIT WHEN FOUND;
    passed := passed || cand;
  END LOOP;
  RETURN cand;
END $$;

-- Claim the first eligible queued job of pool P_POOL for one GPU and start an attempt on it: the
-- worker serves that pool (its own, migration 026, or one it borrows from, migration 028), known and
-- online (touched), the GPU its own and not quarantined, the job not excluding this GPU or worker
-- and asking no more memory than it has (rung_job_allows), its owner below its max_running
-- (p_capped: the owners at theirs; NULL: read them now, rung_owner_room), not one of p_skip (the
-- jobs the calling round gave to other GPUs), and never a config identical to one that failed on
-- this GPU since the job's last retry (a retry says the GPU or host changed:
-- sql/functions/22_job_ops.sql; only a job that ran has attempts, and under the OR the check stays
-- a probe of that job's attempts, never a read of every failed attempt on the GPU); SKIP LOCKED.
--
-- While some owner is capped, or with a fair share (p_running: the jobs each owner runs), the
-- capped owners' queued jobs are not read: rung_claim_pick, above. Returns {"status": "ok",
-- "lease"} | {"status": "none" | "no_worker" | "no_gpu"}. Generic plans, as under rung_claim_pool_round,
-- its caller: with custom plans the scan's `id <> ALL (p_skip)` kept it planned at every call (2.4
-- ms a claim instead of 0.6). A new name, not rung_claim with a pool argument: rung_claim keeps the
-- signature of the release before (why: 30_register.sql).
CREATE OR REPLACE FUNCTION rung_claim_in(p_pool text, p_worker bigint, p_gpu text, p_lease_s int, p_gpu_before jsonb,
                                         p_capped text[], p_running jsonb, p_skip bigint[]) RETURNS jsonb
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  w workers;
  g gpus;
  cand bigint;
  capped text[] := p_capped;
BEGIN
  IF capped IS NULL THEN
    capped := coalesce(rung_owners_capped_in(rung_owner_room(), p_pool), '{}');
  END IF;
  UPDATE workers SET last_seen_at = now(),
                     state = CASE WHEN state = 'offline' THEN 'online' ELSE state END
  WHERE id = p_worker RETURNING * INTO w;
  IF NOT FOUND THEN RETURN jsonb_build_object('status', 'no_worker'); END IF;
  SELECT * INTO g FROM gpus WHERE uuid = p_gpu;
  IF NOT FOUND OR g.worker_id IS DISTINCT FROM p_worker THEN
    RETURN jsonb_build_object('status', 'no_gpu');
  END IF;
  IF g.state = 'quarantined' OR w.state <> 'online' OR NOT rung_worker_takes(p_pool, w.pool, w.borrow) THEN
    RETURN jsonb_build_object('status', 'none');
  END IF;
  IF cardinality(capped) = 0 AND p_running IS NULL THEN
    SELECT c.id INTO cand FROM jobs c
    WHERE c.state = 'queued' AND c.pool = p_pool AND c.id <> ALL (coalesce(p_skip, '{}'))
      AND rung_job_allows(c.constraints, p_worker, p_gpu, g.memory_total_mib)
      AND (c.attempts_count = 0
           OR NOT EXISTS (SELECT 1 FROM attempts f
                          WHERE f.job_id = c.id AND f.gpu_uuid = p_gpu AND f.outcome = 'failed'
                            AND f.number > rung_budget_from(c.recovery_state)
                            AND f.config_hash = md5(coalesce(c.current_config, c.target_config)::text)))
    ORDER BY c.priority, c.created_at, c.id
    LIMIT 1
    FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN RETURN jsonb_build_object('status', 'none'); END IF;
    RETURN rung_claim_start(cand, p_worker, p_gpu, p_lease_s, p_gpu_before);
  END IF;
  cand := rung_claim_pick(capped, p_running, coalesce(p_skip, '{}'), p_worker, p_gpu, g.memory_total_mib, p_pool);
  IF cand IS NULL THEN RETURN jsonb_build_object('status', 'none'); END IF;
  RETURN rung_claim_start(cand, p_worker, p_gpu, p_lease_s, p_gpu_before);
END $$;

-- rung_claim_in for the worker's own pool, by the name and signature of the releases before
-- migration 028 (the tests call it). (Its signature gained p_capped in migration 020's release, and
-- p_running and p_skip in 021's: the old ones are dropped first.)
DROP FUNCTION IF EXISTS rung_claim(bigint, text, int, jsonb);
DROP FUNCTION IF EXISTS rung_claim(bigint, text, int, jsonb, text[]);
DROP FUNCTION IF EXISTS rung_claim(bigint, text, int, jsonb, text[], jsonb);
CREATE OR REPLACE FUNCTION rung_claim(p_worker bigint, p_gpu text, p_lease_s int, p_gpu_before jsonb,
                                      p_capped text[] DEFAULT NULL, p_running jsonb DEFAULT NULL,
                                      p_skip bigint[] DEFAULT '{}') RETURNS jsonb
LANGUAGE sql AS $$
  SELECT rung_claim_in(coalesce((SELECT w.pool FROM workers w WHERE w.id = p_worker), 'default'), p_worker, p_gpu,
                       p_lease_s, p_gpu_before, p_capped, p_running, p_skip)
$$;

-- How many queued jobs of its pool come before queued job J in claim order: (priority, created_at, id), the
-- order of rung_claim above and of rung_claim_batch's scan (41_claim_batch.sql), which must stay
-- the same. The placement of GET /v1/jobs/{id} (rung_job_placement) carries it as "ahead". A claim
-- passes over a job ahead that may not run on its GPU, and a later submit of a lower priority goes
-- before J, so it says where J stands now, not when it runs. A range of jobs_claim up to J's key:
-- O(jobs ahead), read for one job's page.
CREATE OR REPLACE FUNCTION rung_job_ahead(j jobs) RETURNS bigint
LANGUAGE sql STABLE AS $$
  SELECT count(*) FROM jobs c
  WHERE c.state = 'queued' AND c.pool = j.pool AND (c.priority, c.created_at, c.id) < (j.priority, j.created_at, j.id)
$$;
