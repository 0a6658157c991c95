-- The memory model's readers (issue 12, migrations/014_memory.sql): the arch of a config as
-- memmodel_arch computes it, the attempts whose OBSERVATION still counts (memory_observations), and
-- the OBSERVATIONs of an (arch, GPU class) for the CTX, GET /v1/profiles and GET /v1/jobs/{id}/memory.
-- memmodel_arch in SQL (the CTX must pick the arch before rungd has the config): model.arch of the
-- first process without a ":tag" suffix, else the legacy flags is_flux / is_xl / is_v3, else
-- "unknown". it_memory checks the two agree.
CREATE OR REPLACE FUNCTION rung_config_arch(c jsonb) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT split_part(CASE WHEN jsonb_typeof(m->'arch') = 'string' AND m->>'arch' <> '' THEN m->>'arch'
                         WHEN jsonb_typeof(m->'arch') = 'string' THEN 'unknown'
                         WHEN m->'is_flux' = 'true'::jsonb THEN 'flux'
                         WHEN m->'is_xl' = 'true'::jsonb THEN 'sdxl'
                         WHEN m->'is_v3' = 'true'::jsonb THEN 'sd3'
                         ELSE 'unknown' END, ':', 1)
  FROM (SELECT c #> '{config,process,0,model}' AS m) s
$$;

-- Whether worker P_WORKER takes work: online (not draining) and seen in the last 10 minutes. A live
-- worker is seen at least once a minute (each long-poll, at most 60 s, and each heartbeat touch
-- last_seen_at); a host gone for good stops counting after 10 minutes. The one place that rule is
-- written (rung_job_placement, rung_worker_in_fleet).
CREATE OR REPLACE FUNCTION rung_worker_live(p_worker bigint) RETURNS boolean
LANGUAGE sql STABLE AS $$
  SELECT coalesce((SELECT w.state = 'online' AND w.last_seen_at > now() - interval '10 minutes'
                   FROM workers w WHERE w.id = p_worker), false)
$$;

-- Whether worker P_WORKER's GPUs count in the fleet's figures: live, or drained by support
-- (31_drain.sql) and still seen: a drained host comes back, so a job may wait for its GPUs rather
-- than fail for want of a bigger one while it is in maintenance.
CREATE OR REPLACE FUNCTION rung_worker_in_fleet(p_worker bigint) RETURNS boolean
LANGUAGE sql STABLE AS $$
  SELECT coalesce((SELECT w.state IN ('online', 'draining') AND w.last_seen_at > now() - interval '10 minutes'
                   FROM workers w WHERE w.id = p_worker), false)
$$;

-- The fleet's largest usable GPU memory in MiB (0: none), the figure requeue_bigger and a lease's
-- started_bigger weigh (the finish CTX's fleet, the profile cache's fill): a GPU not quarantined on
-- a worker in the fleet (rung_worker_in_fleet: live or drained), so a host gone for good no longer
-- promises a bigger card, which would park a job queued for one that never comes back, while a host
-- in maintenance still does. Walks gpus_usable_memory backwards to the first GPU whose worker
-- counts: a few blocks at 10,000 GPUs (test_batch).
CREATE OR REPLACE FUNCTION rung_fleet_max_gpu_mib() RETURNS int
LANGUAGE sql STABLE AS $$
  SELECT coalesce((SELECT g.memory_total_mib FROM gpus g
                   WHERE g.state <> 'quarantined' AND rung_worker_in_fleet(g.worker_id)
                   ORDER BY g.memory_total_mib DESC LIMIT 1), 0)
$$;

-- The largest usable GPU memory in MiB (0: none) of pool P_POOL (migration 026): what
-- rung_fleet_max_gpu_mib weighs, for the GPUs a job of that pool may run on. The figure a lease's
-- started_bigger (the claim round's init_fleet_mib), a finish's requeue_bigger (the CTX's fleet) and
-- the placement weigh: a bigger card in another pool is one the job will never get, but one of a
-- worker that borrows from the pool (migration 028) takes it when its own pool has no work. The same
-- walk of gpus_usable_memory, past the larger GPUs of other pools.
CREATE OR REPLACE FUNCTION rung_pool_max_gpu_mib(p_pool text) RETURNS int
LANGUAGE sql STABLE AS $$
  SELECT coalesce((SELECT g.memory_total_mib FROM gpus g
                   WHERE g.state <> 'quarantined' AND rung_worker_in_fleet(g.worker_id)
                     AND (SELECT rung_worker_takes(p_pool, w.pool, w.borrow) FROM workers w WHERE w.id = g.worker_id)
                   ORDER BY g.memory_total_mib DESC LIMIT 1), 0)
$$;

-- What a submit answers beside a job of pool P_POOL that no worker in the fleet serves or borrows
-- from now (a typo, or a pool whose hosts are not up yet): {"warnings": [{"field": "pool", "message"}]},
-- which rungd's reply carries with the job; {} otherwise, and always for the default pool. The job is
-- stored all the same: hosts may join the pool later. For a job outside the default pool only. (Here, after rung_worker_in_fleet: the submit, 20_submit.sql,
-- calls it.)
CREATE OR REPLACE FUNCTION rung_submit_pool_warning(p_pool text) RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT CASE WHEN p_pool = 'default'
                   -- two probes of partial indexes (workers_pooled, workers_borrowing), not a read of every worker
                   OR EXISTS (SELECT 1 FROM workers w WHERE w.pool <> 'default' AND w.pool = p_pool
                                                        AND rung_worker_in_fleet(w.id))
                   OR EXISTS (SELECT 1 FROM workers w WHERE w.borrow <> '{}' AND p_pool = ANY (w.borrow)
                                                        AND rung_worker_in_fleet(w.id))
              THEN '{}'::jsonb
              ELSE jsonb_build_object('warnings', jsonb_build_array(jsonb_build_object(
                     'field', 'pool', 'message', 'no worker in the fleet serves pool ' || p_pool
                     || ' or borrows from it: the job waits until one registers (rung-worker --pool ' || p_pool || ')')))
         END
$$;

-- Where queued job J could run now (GET /v1/jobs/{id}, the web job page): {"pool": its pool,
-- "gpus": how many GPUs of its pool (migration 026), not quarantined, on live workers, meet its
-- constraints as a claim reads them (min_gpu_memory_mib, exclude_gpus, exclude_workers; not the hold),
-- "draining_gpus": how many more would on drained workers of its pool or of one that borrows from
-- it (resumed, it takes the job; migration 028), "borrowing_gpus": how many
-- on live workers of other pools that borrow from its pool would when their own pool has no work
-- (migration 028), "other_pools_gpus": how many on the other live workers would (a job sent to the
-- wrong pool, or to one with no host yet),
-- "min_gpu_memory_mib", "fleet_max_gpu_mib": its pool's largest usable GPU (a borrower's counted), "ahead": how many queued
-- jobs of its pool come before it in claim order (rung_job_ahead, 40_claim.sql), "preempting"?: {"attempt_id",
-- "job_id", "worker_id", "gpu_uuid", "why", "priority"} of an attempt being stopped for it
-- (44_preempt.sql; "why" "borrowed" or "priority", "priority" its job's), "held"?:
-- {"worker_id", "until", "attempt", "in_s"} while a checkpoint hold leaves it to that worker's GPUs
-- (recovery/resume.h; the counts above do not weigh the hold), and its owner's limits and quotas where
-- set: "owner_max_running"/"owner_running", "owner_pool_max_running"/"owner_pool_running",
-- "owner_quota" (rung_owner_quota), "owner_pool_quota" (its quota in the job's pool, migration 037)}. 0 GPUs: it waits,
-- for a drained host to be resumed, for a host of its pool, or for one that may never come (its floor
-- was raised by requeue_bigger or started_bigger and the big host left). A claim may still refuse a
-- GPU it counts (a config that failed there). O(GPUs + jobs ahead): for one job's page, not for a
-- list.
CREATE OR REPLACE FUNCTION rung_job_placement(j jobs) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object(
    'pool', j.pool,
    'gpus', count(*) FILTER (WHERE w.pool = j.pool AND rung_worker_live(g.worker_id)),
    'draining_gpus', count(*) FILTER (WHERE rung_worker_takes(j.pool, w.pool, w.borrow) AND NOT rung_worker_live(g.worker_id)),
    'borrowing_gpus', count(*) FILTER (WHERE w.pool <> j.pool AND j.pool = ANY (w.borrow)
                                             AND rung_worker_live(g.worker_id)),
    'other_pools_gpus', count(*) FILTER (WHERE w.pool <> j.pool AND NOT j.pool = ANY (w.borrow)
                                               AND rung_worker_live(g.worker_id)),
    'min_gpu_memory_mib', coalesce((j.constraints->>'min_gpu_memory_mib')::int, 0),
    'fleet_max_gpu_mib', rung_pool_max_gpu_mib(j.pool),
    'ahead', rung_job_ahead(j))
    -- its owner's limit (tokens.max_running, migration 020) and how many of its jobs run now
    || coalesce((SELECT jsonb_build_object('owner_max_running', t.max_running, 'owner_running',
                                           rung_owner_running(j.owner))
                 FROM tokens t WHERE t.name = j.owner AND t.max_running IS NOT NULL), '{}')
    -- its owner's limit in its pool (tokens.pool_limits, migration 034) and how many of its jobs of
    -- that pool run now
    || coalesce((SELECT jsonb_build_object('owner_pool_max_running', (t.pool_limits->>j.pool)::int,
                                           'owner_pool_running', rung_owner_running_in(j.owner, j.pool))
                 FROM tokens t WHERE t.name = j.owner AND t.pool_limits ? j.pool), '{}')
    -- its owner's GPU-hour quota (migration 035), as last read
    || coalesce(jsonb_build_object('owner_quota', rung_owner_quota(j.owner)), '{}')
    -- and its quota in the job's pool (migration 037), as last read
    || coalesce((SELECT jsonb_build_object('owner_pool_quota', q) FROM jsonb_array_elements(rung_owner_pool_quotas(j.owner)) q
                 WHERE q->>'pool' = j.pool), '{}')
    -- held for the worker whose host has its checkpoint (recovery/resume.h), while the hold lasts
    || CASE WHEN rung_held_elsewhere(j.constraints, 0)
            THEN jsonb_build_object('held', jsonb_build_object(
                   'worker_id', (j.constraints->'hold'->>'worker_id')::bigint,
                   'until', j.constraints->'hold'->'until', 'attempt', j.constraints->'hold'->'attempt',
                   'in_s', greatest(ceil(extract(epoch FROM (j.constraints->'hold'->>'until')::timestamptz - now())), 0)::bigint))
            ELSE '{}' END
    -- an attempt being stopped for it (rung_preempt, migration 029): attempts_preempt_for; "why":
    -- "borrowed" (its job is of another pool than its worker's), else "priority", with that job's
    -- (rungd --preempt-priority)
    || coalesce((SELECT jsonb_build_object('preempting', jsonb_build_object(
                          'attempt_id', x.id, 'job_id', x.job_id, 'worker_id', x.worker_id, 'gpu_uuid', x.gpu_uuid,
                          'why', CASE WHEN xj.pool <> xw.pool THEN 'borrowed' ELSE 'priority' END,
                          'priority', xj.priority))
                 FROM attempts x JOIN jobs xj ON xj.id = x.job_id JOIN workers xw ON xw.id = x.worker_id
                 WHERE x.preempt_for = j.id AND x.state = 'running' LIMIT 1), '{}')
  FROM gpus g JOIN workers w ON w.id = g.worker_id
  WHERE g.state <> 'quarantined' AND rung_worker_in_fleet(g.worker_id)
    AND g.memory_total_mib >= coalesce((j.constraints->>'min_gpu_memory_mib')::int, 0)
    AND NOT coalesce(j.constraints->'exclude_gpus' ? g.uuid, false)
    AND NOT coalesce(j.constraints->'exclude_workers' @> to_jsonb(g.worker_id), false)
    AND NOT coalesce(j.constraints->'exclude_workers' ? g.worker_id::text, false)
$$;

-- JOB (rung_job_json) as GET /v1/jobs/{id} and the web job page show it: a queued job with its
-- "placement" (rung_job_placement), a running one being stopped (migration 029) with "stopping":
-- {"attempt_id", "number", "at", "for_job" (null: a requeue), "why": "requeue", "borrowed" (its job is of
-- another pool than its worker's) or "priority" (for an urgent job, rungd --preempt-priority)}, a scheduled one (migration 025) with "starts_in_s", the whole
-- seconds until its run_after by the database's clock (0 once due: the scheduler queues it within a
-- second), so that rungctl and the page say "in 2h05m" whatever the reader's clock says, and, while
-- it waits for other jobs (migration 033; to succeed, or as its after_when says, 036), "waiting_for": [{"id", "name", "state"}] of each
-- (a job retention deleted is left out), so that they say which one holds it and whether it failed;
-- and a job that scheduled jobs wait for (jobs.has_dependents, not succeeded) "awaited_by": their ids,
-- so that its page says who waits for it (a failed one holds them until it is retried). The submit
-- reply and the lists leave both out (the placement reads every GPU).
CREATE OR REPLACE FUNCTION rung_job_json_placed(j jobs) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT rung_job_json(j) || CASE WHEN j.state = 'queued' THEN jsonb_build_object('placement', rung_job_placement(j))
                                  WHEN j.state = 'scheduled' THEN jsonb_build_object('starts_in_s',
                                    greatest(ceil(extract(epoch FROM j.run_after - now())), 0)::bigint)
                                    || CASE WHEN j.waits_for IS NULL THEN '{}'::jsonb
                                            ELSE jsonb_build_object('waiting_for', (
                                              SELECT coalesce(jsonb_agg(jsonb_build_object('id', d.id, 'name', d.name,
                                                                                           'state', d.state) ORDER BY d.id), '[]')
                                              FROM jobs d WHERE d.id = ANY (j.waits_for))) END
                                  -- its running attempt marked for a stop (44_preempt.sql): attempts_one_running
                                  WHEN j.state = 'running' THEN coalesce((
                                    SELECT jsonb_build_object('stopping', jsonb_build_object(
                                             'attempt_id', a.id, 'number', a.number, 'at', a.preempted_at,
                                             'for_job', a.preempt_for,
                                             'why', CASE WHEN a.preempt_for IS NULL THEN 'requeue'
                                                         WHEN j.pool <> w.pool THEN 'borrowed' ELSE 'priority' END))
                                    FROM attempts a JOIN workers w ON w.id = a.worker_id
                                    WHERE a.job_id = j.id AND a.state = 'running'
                                      AND a.preempted_at IS NOT NULL), '{}')
                                  ELSE '{}' END
                           || CASE WHEN j.has_dependents AND j.state <> 'succeeded' THEN coalesce((
                                SELECT jsonb_build_object('awaited_by', jsonb_agg(w.id ORDER BY w.id))
                                FROM jobs w WHERE w.waits_for @> ARRAY[j.id] AND w.waits_for IS NOT NULL
                                  AND w.state = 'scheduled' HAVING count(*) > 0), '{}') ELSE '{}' END
$$;

-- Whether the OBSERVATION of an attempt of ARCH on a GPU of GPU_MIB that ended at ENDED still
-- counts: it ended after the last reset of (its arch, its own GPU's memory class: GPU_MIB rounded to
-- the nearest GiB), so a reset drops what was learned on that class and nothing else. The one place
-- that rule is written (memory_observations and rung_memory_newest read it).
CREATE OR REPLACE FUNCTION rung_memory_counts(p_arch text, p_gpu_mib int, p_ended timestamptz) RETURNS boolean
LANGUAGE sql STABLE AS $$
  SELECT p_ended IS NOT NULL AND NOT EXISTS (
    SELECT 1 FROM memory_profiles m
    WHERE m.arch = p_arch AND m.gpu_class_mib = ((p_gpu_mib + 512) / 1024) * 1024 AND m.reset_at >= p_ended)
$$;

-- The attempts whose OBSERVATION was stored (mem_obs) and still counts.
CREATE OR REPLACE VIEW memory_observations AS
  SELECT a.id, a.job_id, a.mem_arch, a.mem_obs, a.ended_at
  FROM attempts a
  WHERE a.mem_obs IS NOT NULL AND rung_memory_counts(a.mem_arch, a.mem_gpu_mib, a.ended_at);

-- The newest LIMIT observations of ARCH that still count, newest first: a walk down attempts_mem_obs,
-- one entry a step (an index probe below the last id, LIMIT 1), so its cost is O(LIMIT) whatever
-- the statistics say. The plain "WHERE mem_arch = $1 ORDER BY id DESC LIMIT 48" was planned two
-- ways that read far more (docs/PERFORMANCE.md, round 10):
-- - as the primary key walked backwards, filtering on the arch (the planner assumes the arch's rows
--   are spread evenly through the table): for an arch whose observations are older than another's,
--   every newer attempt is read, on every call, for good;
-- - as "read every observation of the arch, sort" when a stale ANALYZE put the arch's rows below the
--   limit (a new deployment's first minutes, a new arch).
-- The arch is matched as ">= AND <=" rather than "=": an equality makes the arch a constant the
-- planner drops from the ORDER BY, after which the primary key provides the order as well; a range
-- keeps it, so attempts_mem_obs is the only ordered path, and btree still positions each probe on
-- (arch, id) directly. Entries a reset hides are stepped over, as the plain query filtered them.
CREATE OR REPLACE FUNCTION rung_memory_newest(p_arch text, p_limit int)
RETURNS TABLE (id bigint, mem_obs jsonb, ended_at timestamptz)
LANGUAGE sql STABLE AS $$
  WITH RECURSIVE walk(id, mem_obs, ended_at, counts, kept) AS (
    SELECT 9223372036854775807::bigint, NULL::jsonb, NULL::timestamptz, false, 0
    UNION ALL
    SELECT s.id, s.mem_obs, s.ended_at, s.counts, w.kept + s.counts::int
    FROM walk w CROSS JOIN LATERAL (
      SELECT a.id, a.mem_obs, a.ended_at, rung_memory_counts(a.mem_arch, a.mem_gpu_mib, a.ended_at) AS counts
      FROM attempts a
      WHERE a.mem_arch >= p_arch AND a.mem_arch <= p_arch AND a.mem_obs IS NOT NULL AND a.id < w.id
      ORDER BY a.mem_arch, a.id DESC LIMIT 1) s
    WHERE w.kept < p_limit)
  SELECT w.id, w.mem_obs, w.ended_at FROM walk w WHERE w.counts
$$;

-- The OBSERVATIONs of ARCH on GPUs of every memory class (what a config needs does not depend on
-- the card: recovery/memmodel.h), newest first, at most 200, plus every one of job P_JOB (NULL:
-- none); each only while it counts (memory_observations: a reset of its own GPU's class drops it).
-- Each carries "at" (when it ended). [] when GPU_MIB is NULL (the
-- profile's class: kept in the signature, the fit judges against it).
CREATE OR REPLACE FUNCTION rung_memory_observations(p_arch text, p_gpu_mib int, p_job bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  WITH o AS (SELECT n.id, n.mem_obs, n.ended_at FROM rung_memory_newest(p_arch, 200) n
             UNION
             SELECT v.id, v.mem_obs, v.ended_at FROM memory_observations v WHERE p_job IS NOT NULL AND v.job_id = p_job)
  SELECT coalesce(jsonb_agg(o.mem_obs || jsonb_build_object('at', o.ended_at) ORDER BY o.id DESC), '[]')
  FROM o WHERE p_gpu_mib IS NOT NULL
$$;

-- The CTX's share of rung_memory_observations (issue 12, finish cost): every observation of job
-- P_JOB and the newest of P_ARCH (every class, each while it counts) up to 48 in all, newest
-- first, compact: no "at", no null figures, and FEATURES without the false or 0 settings memmodel
-- reads as their default anyway (grad_ckpt is kept: it defaults to on). The policy refits on these
-- at each finish; 200 full observations were ~90 KB of CTX, 48 compact ones are under a sixth of that.
CREATE OR REPLACE FUNCTION rung_memory_ctx_observations(p_arch text, p_gpu_mib int, p_job bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  WITH o AS (SELECT n.id, n.mem_obs, false AS own FROM rung_memory_newest(p_arch, 48) n
             UNION ALL
             SELECT v.id, v.mem_obs, true FROM memory_observations v WHERE p_job IS NOT NULL AND v.job_id = p_job),
  k AS (SELECT DISTINCT ON (o.id) o.id, o.mem_obs, o.own FROM o ORDER BY o.id, o.own DESC),
  s AS (SELECT k.id, k.mem_obs FROM k ORDER BY k.own DESC, k.id DESC LIMIT 48)
  SELECT coalesce(jsonb_agg(jsonb_strip_nulls(s.mem_obs - 'at') ||
                            jsonb_build_object('features', (
                              SELECT coalesce(jsonb_object_agg(e.key, e.value), '{}') FROM jsonb_each(s.mem_obs->'features') e
                              WHERE e.key = 'grad_ckpt' OR e.value NOT IN ('false'::jsonb, '0'::jsonb)))
                            ORDER BY s.id DESC), '[]')
  FROM s WHERE p_gpu_mib IS NOT NULL
$$;
