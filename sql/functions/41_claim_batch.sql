-- The claim round: leases for many parked GPUs in one statement (server/lease.c), rung_claim_round
-- at the end of this file. It serves its waiters a pool at a time (migration 026: a job runs only on
-- a worker of its pool), each pool's share with one rung_claim_pool_round, below.
--
-- rung_claim_pool_round: the round for the waiters of pool p_pool, whose candidates are that pool's
-- queued jobs (jobs_claim and jobs_claim_owner lead with the pool, so a GPU never reads another
-- pool's queue).
-- p is [{"i", "worker", "gpu", "before", "fresh"}], served in array order, each with every rule of
-- rung_claim (worker known and online, GPU its own and not quarantined, the job's exclusions,
-- minimum memory and checkpoint hold, its owner below its max_running and its limit in the pool (migration 034),
-- never a config that failed on this GPU, SKIP
-- LOCKED). Owner limits (migration 020) cost nothing when no token has one; otherwise the round
-- locks the limited tokens first (rung_owner_room), leaves owners at their limit out of its scan
-- (reading the other owners' queues instead: rung_queue_head, migration 021) and counts its own
-- choices against the others' room. With p_fair (rungd --fair-share) the candidates come in the order
-- of a fair share among owners (rung_queue_head: within a priority, the owner running the fewest
-- first), this round's choices counted. One index scan locks the
-- first n unlocked queued jobs (n = items); each GPU takes the first of them, in claim order, that
-- it may run (but for a job of no worse a priority held for its worker by a checkpoint hold, which
-- it takes first: recovery/resume.h); a GPU that may run none of them falls back to rung_claim's own scan when more jobs
-- may be queued beyond them. Fresh items must come first: once nothing is left to claim, the items
-- that are not fresh (parked: their worker and GPU were checked by an earlier round) are skipped
-- without a write.
--
-- The waiters are checked set-wise: a round reads the workers and GPUs of a slice of its waiters
-- in one query (after touching those workers in one UPDATE, in id order; last_seen_at at most once
-- a second), reads once on which GPUs each candidate job failed and with which config hashes, and
-- matches waiters to candidates in memory. The slice is what the round can use: every fresh waiter
-- and as many parked ones as there are candidates; a parked waiter past it is read (with the next
-- few) only when the round still has a job for it. Then one statement starts every chosen lease
-- (jobs to running, their attempts, their `leased` events), finding its rows by primary key.
--
-- Rows: every fresh item, and every other one that got a lease or a worker/GPU error, as (i,
-- status "ok" | "none" | "no_worker" | "no_gpu", and for "ok" the attempt id, job id, attempt
-- number, token, LEASE without config and heartbeat_ms, and the config as text, which rungd
-- splices into the reply); a missing row means "none". For a lease that is its job's first attempt
-- at the job's target (attempt number 1, or the first after a retry: 1 + recovery_state.budget_from,
-- sql/functions/22_job_ops.sql; current_config still NULL) the row also carries what
-- rungd's memory check needs (issue 12, server/lease.c): the config's arch (rung_config_arch), the
-- leased GPU's memory, the job's kind and recovery options, and the pool's largest usable GPU
-- (rung_pool_max_gpu_mib, read once a round, only for such a lease); NULL for every other lease.
--
-- Its statements use generic plans (SET plan_cache_mode): with custom plans, the default, plpgsql
-- re-planned four of them at every call, because a generic plan's estimate for an array variable
-- (10-100 rows) costs more than a custom plan's for the real few: 0.5-0.75 ms of planning per round, up
-- to half of a 1.6-1.9 ms round at W=1 (docs/PERFORMANCE.md, rounds 7 and 8). The generic plans were checked
-- on 50,000 jobs and 47,500 attempts: each statement still probes jobs_claim, the primary keys and
-- attempts_job_id_number_key (the rung_claim fallback it calls too, round 7).
CREATE OR REPLACE FUNCTION rung_claim_pool_round(p jsonb, p_lease_s int, p_fair boolean, p_pool text)
RETURNS TABLE (i int, status text, attempt_id bigint, job_id bigint, number int, token text, lease jsonb,
               config text, init_arch text, init_gpu_mib int, init_kind text, init_recovery text,
               init_fleet_mib int)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
  -- the waiters, by position in p
  np int;
  w_i int[];
  w_worker bigint[];
  w_gpu text[];
  w_before jsonb[];
  w_fresh boolean[];
  w_status text[];   -- after lookup: NULL (may lease), 'none', 'no_worker' or 'no_gpu'
  w_mem int[];       -- after lookup: the GPU's memory
  looked int := 0;   -- waiters 1..looked are looked up
  r_status text[];   -- one lookup's answers, for waiters lo..hi
  r_mem int[];
  lo int;
  hi int;
  -- the owners' room under their max_running (rung_owner_room; {} when no token has a limit)
  room jsonb;
  capped text[];
  head bigint[];    -- while some owner is capped, or with a fair share: the first queued jobs (rung_queue_head)
  running jsonb;    -- with a fair share: the jobs each owner runs, this round's choices counted
  -- the candidate jobs, in claim order
  ids bigint[];
  cons jsonb[];
  cown text[];      -- their owners
  cpri int[];       -- their priorities and ages
  cat timestamptz[];
  chome bigint[];   -- per candidate: the worker a checkpoint hold keeps it for now (recovery/resume.h), else NULL
  homed boolean;    -- some candidate is held for some worker
  remaining_free int; -- the candidates not taken and held for no worker
  fb_owner text;    -- the owner of a job rung_claim started
  reran bigint[];     -- the candidates that ran before
  reran_from int[];   -- per reran candidate: recovery_state.budget_from (0 before any retry)
  failed jsonb := '{}'; -- job id -> {GPU -> config hashes that failed on it}
  cur_hash text[];    -- per candidate: md5 of its current config, read when first needed
  h text;
  fits boolean;
  taken boolean[];
  ncand int;
  full_scan boolean;
  remaining int;
  first_free int := 1;
  n int;
  k int;
  chosen int;
  r jsonb;
  -- the leases to start, one entry per chosen waiter
  c_i int[] := '{}';
  c_job bigint[] := '{}';
  c_worker bigint[] := '{}';
  c_gpu text[] := '{}';
  c_before jsonb[] := '{}';
  c_mem int[] := '{}';
BEGIN
  SELECT count(*), array_agg((x.e->>'i')::int ORDER BY x.n), array_agg((x.e->>'worker')::bigint ORDER BY x.n),
         array_agg(x.e->>'gpu' ORDER BY x.n),
         array_agg(CASE WHEN jsonb_typeof(x.e->'before') = 'object' THEN x.e->'before' END ORDER BY x.n),
         array_agg(coalesce((x.e->>'fresh')::boolean, true) ORDER BY x.n)
  INTO np, w_i, w_worker, w_gpu, w_before, w_fresh
  FROM jsonb_array_elements(p) WITH ORDINALITY AS x(e, n);
  IF np = 0 THEN
    RETURN;
  END IF;
  w_status := array_fill(NULL::text, ARRAY[np]);
  w_mem := array_fill(NULL::int, ARRAY[np]);
  -- first of all the round's locks: the limited owners' token rows (none without limits)
  room := rung_owner_room();
  capped := coalesce(rung_owners_capped_in(room, p_pool), '{}');
  IF p_fair THEN
    running := rung_owners_running();
  END IF;

  -- the candidates: the first np queued jobs, in claim order, that no other transaction holds; while
  -- some owner is capped, the first np of the other owners' (rung_queue_head, jobs_claim_owner), so
  -- that the capped owners' queued jobs are not read; with a fair share (p_fair, rungd
  -- --fair-share), in the head's order: the owner running the fewest first
  IF cardinality(capped) = 0 AND NOT p_fair THEN
    SELECT array_agg(x.id ORDER BY x.priority, x.created_at, x.id),
           array_agg(x.constraints ORDER BY x.priority, x.created_at, x.id),
           array_agg(x.owner ORDER BY x.priority, x.created_at, x.id),
           array_agg(x.id ORDER BY x.id) FILTER (WHERE x.attempts_count > 0),
           array_agg(x.budget_from ORDER BY x.id) FILTER (WHERE x.attempts_count > 0), -- aligned with reran
           array_agg(x.priority ORDER BY x.priority, x.created_at, x.id),
           array_agg(x.created_at ORDER BY x.priority, x.created_at, x.id) -- aligned with ids, as cpri
    INTO ids, cons, cown, reran, reran_from, cpri, cat
    FROM (SELECT c.id, c.priority, c.created_at, c.constraints, c.owner, c.attempts_count,
                 rung_budget_from(c.recovery_state) AS budget_from FROM jobs c
          WHERE c.state = 'queued' AND c.pool = p_pool
          ORDER BY c.priority, c.created_at, c.id
          LIMIT np FOR UPDATE SKIP LOCKED) x;
  ELSE
    -- the same from the head, in its order, read by primary key (`= ANY`: one index scan of
    -- jobs_pkey, as the start below, whatever the statistics say; `IS TRUE`: not through
    -- jobs_claim, see the start below; the pool again under the lock: a job moved to another pool
    -- (rung_set_pool) after the head was read is not this pool's)
    head := rung_queue_head(capped, np, running, p_pool);
    SELECT array_agg(x.id ORDER BY x.pos),
           array_agg(x.constraints ORDER BY x.pos),
           array_agg(x.owner ORDER BY x.pos),
           array_agg(x.id ORDER BY x.id) FILTER (WHERE x.attempts_count > 0),
           array_agg(x.budget_from ORDER BY x.id) FILTER (WHERE x.attempts_count > 0),
           array_agg(x.priority ORDER BY x.pos),
           array_agg(x.created_at ORDER BY x.pos)
    INTO ids, cons, cown, reran, reran_from, cpri, cat
    FROM (SELECT c.id, array_position(head, c.id) AS pos, c.constraints, c.owner, c.attempts_count, c.priority,
                 c.created_at, rung_budget_from(c.recovery_state) AS budget_from
          FROM jobs c
          WHERE c.id = ANY (head) AND (c.state = 'queued' AND c.pool = p_pool) IS TRUE
          ORDER BY array_position(head, c.id) FOR UPDATE SKIP LOCKED) x;
  END IF;
  ncand := coalesce(array_length(ids, 1), 0);
  -- more jobs may be queued beyond the candidates (a waiter that may run none of them looks further,
  -- with rung_claim): the scan, or the head, was full
  full_scan := greatest(ncand, cardinality(head)) >= np;
  -- the queued jobs held for these waiters' workers (a checkpoint hold, recovery/resume.h) that the
  -- scan did not reach, after the candidates: one probe of jobs_held (migration 030), which holds
  -- only held jobs. A GPU of the hold's worker takes its held job before a job of no better a
  -- priority ahead of it (below); no other GPU may take it while the hold lasts.
  PERFORM 1 FROM jobs c
  WHERE c.state = 'queued' AND c.constraints ? 'hold' AND (c.constraints->'hold'->>'worker_id')::bigint = ANY (w_worker)
  LIMIT 1;
  IF FOUND THEN
    SELECT ids || coalesce(array_agg(x.id ORDER BY x.priority, x.created_at, x.id), '{}'),
           cons || coalesce(array_agg(x.constraints ORDER BY x.priority, x.created_at, x.id), '{}'),
           cown || coalesce(array_agg(x.owner ORDER BY x.priority, x.created_at, x.id), '{}'),
           cpri || coalesce(array_agg(x.priority ORDER BY x.priority, x.created_at, x.id), '{}'),
           cat || coalesce(array_agg(x.created_at ORDER BY x.priority, x.created_at, x.id), '{}'),
           reran || coalesce(array_agg(x.id ORDER BY x.id) FILTER (WHERE x.attempts_count > 0), '{}'),
           reran_from || coalesce(array_agg(x.budget_from ORDER BY x.id) FILTER (WHERE x.attempts_count > 0), '{}')
    INTO ids, cons, cown, cpri, cat, reran, reran_from
    FROM (SELECT c.id, c.priority, c.created_at, c.constraints, c.owner, c.attempts_count,
                 rung_budget_from(c.recovery_state) AS budget_from FROM jobs c
          WHERE c.state = 'queued' AND c.constraints ? 'hold'
            AND (c.constraints->'hold'->>'worker_id')::bigint = ANY (w_worker)
            AND c.pool = p_pool AND c.id <> ALL (coalesce(ids, '{}')) AND rung_held_elsewhere(c.constraints, 0)
          ORDER BY c.id FOR UPDATE SKIP LOCKED) x;
  END IF;
  ncand := coalesce(array_length(ids, 1), 0);
  -- the checkpoint holds in force among the candidates (most rounds: none)
  SELECT array_agg(CASE WHEN x.c ? 'hold' AND rung_held_elsewhere(x.c, 0) THEN (x.c->'hold'->>'worker_id')::bigint END
                   ORDER BY x.n)
  INTO chome FROM unnest(cons) WITH ORDINALITY AS x(c, n);
  homed := ncand > 0 AND EXISTS (SELECT 1 FROM unnest(chome) hh WHERE hh IS NOT NULL);
  remaining := ncand;
  remaining_free := (SELECT count(*) FROM unnest(chome) hh WHERE hh IS NULL)::int;
  taken := array_fill(false, ARRAY[greatest(ncand, 1)]);
  cur_hash := array_fill(NULL::text, ARRAY[greatest(ncand, 1)]);
  IF reran IS NOT NULL THEN
    -- a job is not offered again to a GPU on which its current config failed since its last retry
    -- (rung_claim's rule; reran_from: the attempts before the retry, sql/functions/22_job_ops.sql);
    -- only a job that ran has attempts (attempts_count counts them: rung_release, which deletes an
    -- attempt that never started, takes it back; it_chaos checks the two agree). Printing and
    -- hashing a config costs more than the rest of a lease, so the current config's hash is read
    -- only for a candidate offered to a GPU it failed on (as rung_claim_eligible did).
    SELECT coalesce(jsonb_object_agg(t.job_id::text, t.gpus), '{}') INTO failed
    FROM (SELECT u.job_id, jsonb_object_agg(u.gpu_uuid, u.hashes) AS gpus
          FROM (SELECT f.job_id, f.gpu_uuid, jsonb_agg(DISTINCT f.config_hash) AS hashes
                FROM attempts f JOIN unnest(reran, reran_from) AS rf(job_id, n) ON rf.job_id = f.job_id
                WHERE f.job_id = ANY (reran) AND f.outcome = 'failed' AND f.gpu_uuid IS NOT NULL AND f.number > rf.n
                GROUP BY f.job_id, f.gpu_uuid) u
          GROUP BY u.job_id) t;
  END IF;

  FOR n IN 1 .. np LOOP
    IF NOT w_fresh[n] AND NOT full_scan THEN
      EXIT WHEN remaining = 0; -- nothing left to claim, and (fresh items first) only parked waiters remain
      -- what is left is held for other workers: a parked waiter of none of them is not looked up
      CONTINUE WHEN remaining_free = 0 AND NOT coalesce(w_worker[n] = ANY (chome), false);
    END IF;
    IF n > looked THEN
      -- the first time: every fresh waiter and as many parked ones as there are candidates; later,
      -- this parked waiter and a few more, for the candidates still free
      lo := n;
      hi := least(np, CASE WHEN looked = 0
                           THEN (SELECT count(*) FROM unnest(w_fresh) f WHERE f)::int + ncand
                           ELSE n + greatest(remaining, 8) - 1 END);
      hi := greatest(hi, n);
      -- touch the workers (last_seen_at at most once a second, offline ones back online), locked in
      -- id order
      UPDATE workers SET last_seen_at = now(),
                         state = CASE WHEN state = 'offline' THEN 'online' ELSE state END
      WHERE id IN (SELECT k.id FROM workers k
                   WHERE k.id = ANY (w_worker[lo:hi])
                     AND (k.state = 'offline' OR k.last_seen_at < now() - interval '1 second')
                   ORDER BY k.id FOR NO KEY UPDATE);
      SELECT array_agg(CASE WHEN w.id IS NULL THEN 'no_worker'
                            WHEN g.uuid IS NULL OR g.worker_id IS DISTINCT FROM x.wid THEN 'no_gpu'
                            WHEN g.state = 'quarantined' OR w.state <> 'online' THEN 'none'
                            -- its worker joined another pool since rung_claim_round grouped the
                            -- waiters (a restart with another --pool): none now, the next round
                            -- groups it again; never this pool's jobs
                            -- (or stopped borrowing from it, migration 028)
                            WHEN NOT rung_worker_takes(p_pool, w.pool, w.borrow) THEN 'none' END ORDER BY x.k),
             array_agg(g.memory_total_mib ORDER BY x.k)
      INTO r_status, r_mem
      FROM unnest(w_worker[lo:hi], w_gpu[lo:hi]) WITH ORDINALITY AS x(wid, gpu, k)
      LEFT JOIN LATERAL (SELECT w.id, w.state, w.pool, w.borrow FROM workers w WHERE w.id = x.wid OFFSET 0) w ON true
      LEFT JOIN LATERAL (SELECT g.uuid, g.worker_id, g.state, g.memory_total_mib FROM gpus g
                         WHERE g.uuid = x.gpu OFFSET 0) g ON true;
      FOR k IN lo .. hi LOOP
        w_status[k] := r_status[k - lo + 1];
        w_mem[k] := r_mem[k - lo + 1];
      END LOOP;
      looked := hi;
    END IF;
    r := NULL;
    IF w_status[n] IS NOT NULL THEN
      r := jsonb_build_object('status', w_status[n]);
    ELSE
      chosen := NULL;
      WHILE first_free <= ncand AND taken[first_free] LOOP
        first_free := first_free + 1;
      END LOOP;
      k := first_free;
      WHILE k <= ncand LOOP
        -- past the first job it may run (no fair share), only a job held for its worker, of no worse a
        -- priority, is still weighed (its config is not hashed for nothing)
        IF chosen IS NOT NULL AND NOT p_fair
           AND (chome[k] IS DISTINCT FROM w_worker[n] OR cpri[k] > cpri[chosen]) THEN
          k := k + 1;
          CONTINUE;
        END IF;
        IF NOT taken[k]
           AND (room = '{}' OR rung_room_open(room, cown[k], p_pool)) -- its owner's place may have gone this round
           AND NOT coalesce(cons[k]->'exclude_gpus' ? w_gpu[n], false)
           AND NOT coalesce(cons[k]->'exclude_workers' @> to_jsonb(w_worker[n]), false)
           AND NOT coalesce(cons[k]->'exclude_workers' ? w_worker[n]::text, false)
           AND coalesce((cons[k]->>'min_gpu_memory_mib')::int, 0) <= w_mem[n]
           -- (the `?` first: a job without a hold costs no call)
           AND NOT (cons[k] ? 'hold' AND rung_held_elsewhere(cons[k], w_worker[n])) THEN
          fits := true;
          IF coalesce(failed->(ids[k]::text) ? w_gpu[n], false) THEN
            IF cur_hash[k] IS NULL THEN
              SELECT md5(coalesce(c.current_config, c.target_config)::text) INTO h FROM jobs c WHERE c.id = ids[k];
              cur_hash[k] := h;
            END IF;
            fits := NOT (failed->(ids[k]::text)->w_gpu[n] ? cur_hash[k]);
          END IF;
          IF fits AND NOT p_fair AND NOT homed THEN
            chosen := k; -- the first in claim order
            EXIT;
          ELSIF fits AND NOT p_fair THEN
            -- the first in claim order, but for a job of no worse a priority held for this worker
            -- further on (its checkpoint is on this host: delay scheduling's local task first)
            IF chosen IS NULL THEN
              chosen := k;
              EXIT WHEN chome[k] IS NOT DISTINCT FROM w_worker[n] OR NOT coalesce(w_worker[n] = ANY (chome), false);
            ELSE
              -- held for this worker, no worse a priority (the loop's first test): held jobs the scan
              -- did not reach come after the candidates, and one queued again since the scan may be of
              -- a better priority
              chosen := k;
              EXIT;
            END IF;
          ELSIF fits AND (chosen IS NULL
                          OR (cpri[k], chome[k] IS DISTINCT FROM w_worker[n], coalesce((running->>cown[k])::int, 0), cat[k], ids[k])
                             < (cpri[chosen], chome[chosen] IS DISTINCT FROM w_worker[n],
                                coalesce((running->>cown[chosen])::int, 0), cat[chosen], ids[chosen])) THEN
            -- a fair share: of the candidates this GPU may run, the one whose owner runs the fewest
            -- now (this round's choices counted), oldest first; not the head's order, which
            -- assumed each owner's earlier jobs would be taken
            chosen := k;
          END IF;
        END IF;
        k := k + 1;
      END LOOP;
      IF chosen IS NOT NULL THEN
        taken[chosen] := true;
        remaining := remaining - 1;
        IF chome[chosen] IS NULL THEN
          remaining_free := remaining_free - 1;
        END IF;
        room := rung_room_take(room, cown[chosen], p_pool);
        IF p_fair THEN
          running := jsonb_set(running, ARRAY[cown[chosen]], to_jsonb(coalesce((running->>cown[chosen])::int, 0) + 1));
        END IF;
        c_i := c_i || w_i[n];
        c_job := c_job || ids[chosen];
        c_worker := c_worker || w_worker[n];
        c_gpu := c_gpu || w_gpu[n];
        c_before := c_before || w_before[n];
        c_mem := c_mem || w_mem[n];
        CONTINUE; -- started below, with the others
      ELSIF full_scan THEN
        -- the owners with no place left, counting this round's choices
        -- (not the jobs this round gave to other GPUs: its SKIP LOCKED does not skip this
        -- transaction's own locks)
        r := rung_claim_in(p_pool, w_worker[n], w_gpu[n], p_lease_s, w_before[n],
                           coalesce(rung_owners_capped_in(room, p_pool), '{}'), running, c_job);
        IF (room <> '{}' OR p_fair) AND r->>'status' = 'ok' THEN
          SELECT c.owner INTO fb_owner FROM jobs c WHERE c.id = (r->'lease'->>'job_id')::bigint;
          room := rung_room_take(room, fb_owner, p_pool);
          IF p_fair THEN
            running := jsonb_set(running, ARRAY[fb_owner], to_jsonb(coalesce((running->>fb_owner)::int, 0) + 1));
          END IF;
        END IF;
      ELSE
        r := jsonb_build_object('status', 'none');
      END IF;
    END IF;
    IF w_fresh[n] OR r->>'status' <> 'none' THEN
      i := w_i[n];
      status := r->>'status';
      lease := r->'lease';
      attempt_id := (lease->>'attempt_id')::bigint;
      job_id := (lease->>'job_id')::bigint;
      number := (lease->>'number')::int;
      token := lease->>'token';
      config := (lease->'config')::text;
      lease := lease - 'config';
      init_arch := NULL;
      init_gpu_mib := NULL;
      init_kind := NULL;
      init_recovery := NULL;
      init_fleet_mib := NULL;
      IF status = 'ok' THEN -- rung_claim's lease (rare): the same as below
        SELECT rung_config_arch(c.target_config), w_mem[n], c.kind, c.recovery::text, rung_pool_max_gpu_mib(p_pool)
        INTO init_arch, init_gpu_mib, init_kind, init_recovery, init_fleet_mib
        FROM jobs c WHERE c.id = job_id AND c.current_config IS NULL
                      AND number = 1 + rung_budget_from(c.recovery_state);
      END IF;
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
    SELECT * FROM unnest(c_i, c_job, c_worker, c_gpu, c_before, c_mem) AS c(i, job_id, worker_id, gpu, before, mem)),
  j AS (
    UPDATE jobs SET state = 'running', attempts_count = attempts_count + 1, updated_at = now(),
                    next_action = NULL,
                    -- a checkpoint hold ends with the lease (rung_job_allows, 40_claim.sql)
                    constraints = CASE WHEN jobs.constraints ? 'hold' THEN jobs.constraints - 'hold'
                                       ELSE jobs.constraints END
    -- `IS TRUE`: the planner cannot match it to jobs_claim's predicate, so it probes these few
    -- jobs by primary key instead of reading the whole queue through that index
    FROM c WHERE jobs.id = c.job_id AND jobs.id = ANY (c_job) AND (jobs.state = 'queued') IS TRUE
      -- a start deadline passed (migration 039): not started late; the waiter parks, and the deadline
      -- pass, which cancels it within the second, wakes it
      AND (jobs.start_by IS NULL OR jobs.start_by > now() OR jobs.attempts_count > 0)
    -- the config is printed once, then hashed and returned as that text
    -- a first attempt at the target: its arch, for rungd's memory check (jsonb path reads only)
    RETURNING jobs.id, jobs.attempts_count, jobs.current_config,
              coalesce(jobs.current_config, jobs.target_config)::text AS cfg,
              CASE WHEN jobs.current_config IS NULL
                        AND jobs.attempts_count = 1 + rung_budget_from(jobs.recovery_state)
                   THEN rung_config_arch(jobs.target_config) END AS arch, jobs.kind, jobs.recovery),
  a AS (
    INSERT INTO attempts (job_id, number, worker_id, gpu_uuid, config, config_hash, token,
                          lease_expires_at, gpu_before, phase)
    SELECT j.id, j.attempts_count, c.worker_id, c.gpu, j.current_config, md5(j.cfg),
           replace(gen_random_uuid()::text, '-', '') || replace(gen_random_uuid()::text, '-', ''),
           now() + make_interval(secs => p_lease_s), c.before, 'start'
    FROM c JOIN j ON j.id = c.job_id ORDER BY j.id
    RETURNING attempts.id, attempts.job_id, attempts.number, attempts.worker_id, attempts.gpu_uuid,
              attempts.config_hash, attempts.token)
  -- their `leased` events are the attempt rows themselves (lease_event_id; the events view, 015)
  SELECT c.i, 'ok'::text, a.id, a.job_id, a.number, a.token,
         jsonb_build_object('attempt_id', a.id, 'job_id', a.job_id, 'number', a.number, 'token', a.token,
                            'lease_seconds', p_lease_s, 'stall_timeout_s', j.recovery->'stall_timeout_s'),
         j.cfg, j.arch, CASE WHEN j.arch IS NOT NULL THEN c.mem END, CASE WHEN j.arch IS NOT NULL THEN j.kind END,
         CASE WHEN j.arch IS NOT NULL THEN j.recovery::text END,
         -- uncorrelated: read once, and only when a row has an arch
         CASE WHEN j.arch IS NOT NULL THEN (SELECT rung_pool_max_gpu_mib(p_pool)) END
  FROM c JOIN a ON a.job_id = c.job_id JOIN j ON j.id = c.job_id;
END $$;

-- The claim round (server/lease.c, sql/claim_batch.sql): rung_claim_pool_round for the waiters of
-- each pool in turn, by their workers' pools, in the pools' name order (fresh waiters come first, and
-- stay first within each pool's share). The name order, not the first waiter's: two replicas' rounds
-- then lock the rows of the pools they share in the same order (a worker and a queued job belong to
-- one pool, each pool round locks its own in id order, the limited tokens are locked first in id
-- order), so they cannot deadlock across pools. A fleet whose workers are all in the default pool
-- costs two probes of empty partial indexes (workers_pooled, workers_borrowing) and one pool round,
-- as before pools. The pools' rounds share the transaction: a later one counts the leases of an
-- earlier one against the owners' limits and fair share (rung_owners_running reads this
-- transaction's new attempts). A waiter whose worker is unknown goes with the default pool, whose
-- round answers it no_worker. Each row also names the waiter's own pool, so that rungd, which parks
-- the waiters, can try every pool's parked GPUs when it is woken (server/lease.c), not only the
-- first pool's.
--
-- Borrowing (migration 028): once every pool's own waiters have been served, the waiters that got
-- nothing and whose workers borrow go round again, for the first pool each borrows from, then for
-- the second, and so on (each level in the pools' name order). So a pool's own GPUs take its jobs
-- before a borrower does, in the same round; across rounds a borrower takes what the pool's own
-- GPUs, all busy, left queued. A fresh waiter's one row is the last pool's it tried: its "none"
-- rows are held back while it has a pool left to try. Borrowing adds little locking: a borrowed
-- pool's jobs are taken with SKIP LOCKED, the limited tokens are locked by the first level, and so are
-- the workers it touched; a parked waiter the first level did not reach has its worker touched (in
-- id order) as in any round, and rungd retries a deadlock (40P01) as it does for any round.
DROP FUNCTION IF EXISTS rung_claim_round(jsonb, int, boolean); -- a build of this release returned no pool
CREATE OR REPLACE FUNCTION rung_claim_round(p jsonb, p_lease_s int, p_fair boolean)
RETURNS TABLE (i int, status text, attempt_id bigint, job_id bigint, number int, token text, lease jsonb,
               config text, init_arch text, init_gpu_mib int, init_kind text, init_recovery text,
               init_fleet_mib int, pool text)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
  v_pool text;
  v_share jsonb;
  v_borrows boolean := EXISTS (SELECT 1 FROM workers w WHERE w.borrow <> '{}');
  v_waiters jsonb;   -- with borrowing: p, each item with "pools", its worker's own pool then those it borrows from
  v_home jsonb;      -- with borrowing: i -> that list
  v_levels int;
  v_done int[] := '{}'; -- with borrowing: the waiters that got a lease or a worker or GPU error
  r record;
BEGIN
  IF NOT v_borrows AND NOT EXISTS (SELECT 1 FROM workers w WHERE w.pool <> 'default') THEN
    RETURN QUERY SELECT r.*, 'default'::text FROM rung_claim_pool_round(p, p_lease_s, p_fair, 'default') r;
    RETURN;
  END IF;
  IF NOT v_borrows THEN
    FOR v_pool, v_share IN
      SELECT coalesce(w.pool, 'default'), jsonb_agg(x.e ORDER BY x.n)
      FROM jsonb_array_elements(p) WITH ORDINALITY AS x(e, n)
      LEFT JOIN workers w ON w.id = (x.e->>'worker')::bigint
      GROUP BY coalesce(w.pool, 'default')
      ORDER BY 1
    LOOP
      RETURN QUERY SELECT r.*, v_pool FROM rung_claim_pool_round(v_share, p_lease_s, p_fair, v_pool) r;
    END LOOP;
    RETURN;
  END IF;

  SELECT jsonb_agg(x.e || jsonb_build_object('pools', to_jsonb(ARRAY[coalesce(w.pool, 'default')]
                                                               || coalesce(w.borrow, '{}'))) ORDER BY x.n),
         jsonb_object_agg(x.e->>'i', to_jsonb(ARRAY[coalesce(w.pool, 'default')] || coalesce(w.borrow, '{}'))),
         max(1 + cardinality(coalesce(w.borrow, '{}')))
  INTO v_waiters, v_home, v_levels
  FROM jsonb_array_elements(p) WITH ORDINALITY AS x(e, n)
  LEFT JOIN workers w ON w.id = (x.e->>'worker')::bigint;
  FOR lvl IN 1 .. coalesce(v_levels, 0) LOOP
    FOR v_pool, v_share IN
      SELECT x.e->'pools'->>(lvl - 1), jsonb_agg(x.e - 'pools' ORDER BY x.n)
      FROM jsonb_array_elements(v_waiters) WITH ORDINALITY AS x(e, n)
      WHERE jsonb_array_length(x.e->'pools') >= lvl AND NOT (x.e->>'i')::int = ANY (v_done)
      GROUP BY 1
      ORDER BY 1
    LOOP
      IF lvl < v_levels THEN
        -- nothing queued in this pool (one probe of jobs_claim, in its order: as an EXISTS, whose
        -- ORDER BY the planner drops, the generic plan scanned the whole table for an empty pool,
        -- 33 ms a round behind 100,000 jobs of another pool; docs/PERFORMANCE.md round 17): the
        -- waiters with a pool left go straight to it, looked up there once; the others still get
        -- their rows here
        PERFORM 1 FROM jobs c WHERE c.state = 'queued' AND c.pool = v_pool
        ORDER BY c.priority, c.created_at, c.id LIMIT 1;
        IF NOT FOUND THEN
          SELECT jsonb_agg(x.e ORDER BY x.n) INTO v_share
          FROM jsonb_array_elements(v_share) WITH ORDINALITY AS x(e, n)
          WHERE jsonb_array_length(v_home->(x.e->>'i')) <= lvl;
          CONTINUE WHEN v_share IS NULL;
        END IF;
      END IF;
      FOR r IN SELECT * FROM rung_claim_pool_round(v_share, p_lease_s, p_fair, v_pool) LOOP
        IF r.status <> 'none' THEN
          v_done := v_done || r.i;
        ELSIF jsonb_array_length(v_home->(r.i::text)) > lvl THEN
          CONTINUE; -- nothing in this pool: it tries the next it borrows from
        END IF;
        i := r.i;
        status := r.status;
        attempt_id := r.attempt_id;
        job_id := r.job_id;
        number := r.number;
        token := r.token;
        lease := r.lease;
        config := r.config;
        init_arch := r.init_arch;
        init_gpu_mib := r.init_gpu_mib;
        init_kind := r.init_kind;
        init_recovery := r.init_recovery;
        init_fleet_mib := r.init_fleet_mib;
        pool := v_home->(r.i::text)->>0;
        RETURN NEXT;
      END LOOP;
    END LOOP;
  END LOOP;
END $$;

-- The round by its name and columns of the release before migration 026, for its rungd during a
-- rollout (its rows carry no init_fleet_mib; that rungd reads the fleet's from its profile cache).
-- The tests call it too. (Its two-argument version, from before migration 021, is dropped.)
DROP FUNCTION IF EXISTS rung_claim_batch(jsonb, int);
CREATE OR REPLACE FUNCTION rung_claim_batch(p jsonb, p_lease_s int, p_fair boolean DEFAULT false)
RETURNS TABLE (i int, status text, attempt_id bigint, job_id bigint, number int, token text, lease jsonb,
               config text, init_arch text, init_gpu_mib int, init_kind text, init_recovery text)
LANGUAGE sql AS $$
  SELECT r.i, r.status, r.attempt_id, r.job_id, r.number, r.token, r.lease, r.config, r.init_arch, r.init_gpu_mib,
         r.init_kind, r.init_recovery
  FROM rung_claim_round(p, p_lease_s, p_fair) r
$$;
