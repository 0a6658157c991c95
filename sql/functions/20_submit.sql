-- Submit: many jobs in one statement (server/batch.c gathers the POST /v1/jobs calls that arrive
-- close together). A job stores its config once, as target_config; current_config stays NULL (the
-- target) until a rung changes it (migrations/006, docs/PERFORMANCE.md).

-- When a submit item's job starts (migration 025): its "run_after_ms" (the envelope's RFC 3339
-- "run_after" as milliseconds since the epoch, read and bounded by rungd) or now() + its "start_in_s",
-- by the database's clock, when that is in the future; NULL (queued at once) when the item gives
-- neither or its time is not in the future. One expression, so that it is inlined into the insert.
CREATE OR REPLACE FUNCTION rung_submit_run_after(p_item jsonb) RETURNS timestamptz LANGUAGE sql STABLE AS $$
  SELECT nullif(greatest(CASE WHEN p_item ? 'run_after_ms' THEN to_timestamp((p_item->>'run_after_ms')::float8 / 1000)
                              WHEN p_item ? 'start_in_s' THEN now() + make_interval(secs => (p_item->>'start_in_s')::float8)
                         END, now()), now())
$$;

-- A submit item's start deadline (migration 039): its "start_by_ms" (the envelope's RFC 3339
-- "start_by", read and bounded by rungd) or now() + its "start_within_s", by the database's clock
-- (as rung_submit_run_after); NULL without one.
CREATE OR REPLACE FUNCTION rung_submit_start_by(p_item jsonb) RETURNS timestamptz LANGUAGE sql STABLE AS $$
  SELECT CASE WHEN p_item ? 'start_by_ms' THEN to_timestamp((p_item->>'start_by_ms')::float8 / 1000)
              WHEN p_item ? 'start_within_s' THEN now() + make_interval(secs => (p_item->>'start_within_s')::float8) END
$$;

-- The `submitted` event's data: kind, priority, owner, and run_after for a scheduled job (columns, not
-- the row: no composite value is built per job on the submit path).
CREATE OR REPLACE FUNCTION rung_submit_event_data(p_kind text, p_priority int, p_owner text, p_run_after timestamptz)
RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT CASE WHEN p_run_after IS NULL
              THEN jsonb_build_object('kind', p_kind, 'priority', p_priority, 'owner', p_owner)
              ELSE jsonb_build_object('kind', p_kind, 'priority', p_priority, 'owner', p_owner, 'run_after', p_run_after) END
$$;

-- A submit's labels (the envelope's "labels", checked by rungd: common/labels.h); {} when it has none.
CREATE OR REPLACE FUNCTION rung_submit_labels(body jsonb) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN jsonb_typeof(body->'labels') = 'object' THEN body->'labels' ELSE '{}'::jsonb END
$$;

-- A submit's pool (the envelope's "pool", checked by rungd: common/pool.h; migration 026); 'default'
-- when it names none.
CREATE OR REPLACE FUNCTION rung_submit_pool(body jsonb) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce(body->>'pool', 'default')
$$;

-- What a submit or a move refused for its pool answers ({"pool": the pool asked for, "pools": the
-- owner's token's pools}), for rungd's 403.
CREATE OR REPLACE FUNCTION rung_submit_pool_refusal(p_owner text, p_pool text) RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object('pool', p_pool, 'pools', (SELECT to_jsonb(t.pools) FROM tokens t WHERE t.name = p_owner))
$$;

-- A submit's warnings about the jobs it runs after (migration 033): one {"field": "after", "message"} per
-- job of P_WAITS (those not succeeded yet) that failed or was cancelled, which holds the new job until
-- it is retried and succeeds; [] for none.
CREATE OR REPLACE FUNCTION rung_submit_after_warnings(p_waits bigint[]) RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT coalesce(jsonb_agg(jsonb_build_object('field', 'after', 'message',
           'job ' || d.id || CASE d.state WHEN 'failed' THEN ' failed' ELSE ' was cancelled' END
           || ': this job waits until it is retried and succeeds (or until this job is started now)') ORDER BY d.id), '[]')
  FROM jobs d WHERE d.id = ANY (p_waits) AND d.state IN ('failed', 'cancelled')
$$;

-- The set-wise insert, for a batch where no item carries an Idempotency-Key (the common case): one
-- INSERT of every job and one of their `submitted` events. The ids are drawn first (x is
-- materialized, so nextval runs once per item) to tie each row back to its item. Only keyed
-- submits store a request_hash: it is compared only when a later submit repeats the key, and
-- printing a ~3 KB body to hash it was about 7 % of Postgres' time per submit. An item with a start
-- time in the future (rung_submit_run_after) is stored 'scheduled' with its run_after, and its
-- `submitted` event goes to 'scheduled'. An item whose pool its owner's token may not use
-- (rung_pool_allowed, migration 027) is not inserted: its row says 'pool_refused', with the pool and
-- the token's pools as the job (rung_submit_pool_refusal).
CREATE OR REPLACE FUNCTION rung_submit_set(p jsonb)
RETURNS TABLE (i int, status text, job_id bigint, job jsonb, target text, current text) LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
  -- plpgsql, not sql: the statement is planned once per connection instead of once per call
  RETURN QUERY
  WITH x AS MATERIALIZED (
    SELECT (e->>'i')::int AS i, e, nextval(pg_get_serial_sequence('jobs', 'id')) AS id,
           rung_submit_run_after(e) AS run_after, rung_pool_allowed(e->>'owner', rung_submit_pool(e->'body')) AS allowed
    FROM jsonb_array_elements(p) e),
  ins AS (
    INSERT INTO jobs (id, name, owner, kind, priority, target_config, current_config, recovery, request_hash, labels,
                      state, run_after, pool, start_by)
    SELECT x.id, x.e->>'name', x.e->>'owner', x.e->>'kind', (x.e->>'priority')::int, x.e->'body'->'config', NULL,
           x.e->'recovery', NULL, rung_submit_labels(x.e->'body'),
           CASE WHEN x.run_after IS NULL THEN 'queued' ELSE 'scheduled' END, x.run_after, rung_submit_pool(x.e->'body'),
           rung_submit_start_by(x.e)
    FROM x WHERE x.allowed ORDER BY x.id
    RETURNING *),
  ev AS (
    INSERT INTO event_log (job_id, kind, to_state, reason, data)
    SELECT ins.id, 'submitted', ins.state, 'submitted', rung_submit_event_data(ins.kind, ins.priority, ins.owner, ins.run_after)
    FROM ins ORDER BY ins.id),
  -- the warning of each pool the batch submitted to, read once per pool, not per job (MATERIALIZED:
  -- inlined, the join computed it again for every job, round 24)
  warn AS MATERIALIZED (SELECT d.pool, rung_submit_pool_warning(d.pool) AS w FROM (SELECT DISTINCT ins.pool FROM ins) d)
  SELECT r.* FROM (
    SELECT x.i, 'created'::text, ins.id, rung_job_json_lean(ins::jobs) || warn.w, ins.target_config::text, NULL::text
    FROM x JOIN ins ON ins.id = x.id JOIN warn ON warn.pool = ins.pool
    UNION ALL
    SELECT x.i, 'pool_refused'::text, NULL::bigint, rung_submit_pool_refusal(x.e->>'owner', rung_submit_pool(x.e->'body')), NULL::text, NULL::text
    FROM x WHERE NOT x.allowed) r
  ORDER BY 1;
END $$;

-- Submit many jobs: p is [{"i", "name", "owner", "kind", "priority", "recovery", "key", "body",
-- "run_after_ms"?, "start_in_s"?, "after"?, "after_when"?, "after_any"?}] (key: the owner-scoped Idempotency-Key or null; body: the request,
-- whose "config" is the job's config; run_after_ms / start_in_s: when it starts, read from the body
-- by rungd, rung_submit_run_after; a body's own run_after or start_in_s is part of its request
-- hash, so the same key with another start time is a conflict). Set-wise (rung_submit_set) when no item carries a key; else item by item, in array
-- order, each an insert-or-return-existing (the same request hash: md5 of the body as jsonb text),
-- so a repeated key later in the same batch finds the earlier job. Rows: (i, status "created" |
-- "existing" | "conflict", the job's id, the lean JOB (with "warnings" when no worker takes from its
-- pool: rung_submit_pool_warning), target_config as text, current_config as text or NULL when it is
-- the target) per item; rungd splices the configs into the JOB; or (i,
-- "pool_refused", NULL, rung_submit_pool_refusal) for an item whose pool its owner may not use
-- (migration 027; a repeated key answers its job as before). An item with "after" (migration 033: the
-- ids of the jobs it runs after, 1 to 256 as rungd checked them, sorted and made distinct here) goes item by item too: each
-- of those jobs must exist and be its owner's (any owner's with "after_any": staff), else the row is (i,
-- "after_unknown", NULL, {"after": the first id that is not}: rung_after_unknown) and nothing is
-- stored; with "after_when" (migration 036: "succeeded", the default, "ended" or "failed"), which
-- endings release it, and with "failed" one that already succeeded is (i, "after_never", NULL,
-- {"after": it}: the job would never start) and nothing is stored; they are armed (rung_after_arm, 23_scheduled.sql: locked and marked before their states are
-- read, so a finish under way either commits first or sees the new job); the job is
-- stored 'scheduled' with waits_for the ones not succeeded yet (queued when none is left and it has
-- no start time ahead). No NOTIFY:
-- rungd wakes the replicas after the commit (server/lease.c lease_announce: notifying
-- transactions commit one at a time, never in one shared WAL flush). (Its result columns changed in migration 007: a return type cannot
-- be replaced, so a database from before that has its old version dropped first.)
DROP FUNCTION IF EXISTS rung_submit_batch(jsonb);
CREATE OR REPLACE FUNCTION rung_submit_batch(p jsonb)
RETURNS TABLE (i int, status text, job_id bigint, job jsonb, target text, current text) LANGUAGE plpgsql AS $$
DECLARE
  e jsonb;
  j jobs;
  h text;
  v_run_after timestamptz;
  v_after bigint[];
  v_when text;
  v_waits bigint[];
  v_missing bigint;
  created int := 0;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM jsonb_array_elements(p) k WHERE jsonb_typeof(k->'key') = 'string' OR k ? 'after') THEN
    RETURN QUERY SELECT * FROM rung_submit_set(p);
    RETURN;
  END IF;
  FOR e IN SELECT x FROM jsonb_array_elements(p) x LOOP
    i := (e->>'i')::int;
    h := CASE WHEN jsonb_typeof(e->'key') = 'string' THEN md5((e->'body')::text) END;
    v_run_after := rung_submit_run_after(e);
    IF NOT rung_pool_allowed(e->>'owner', rung_submit_pool(e->'body'))
       AND NOT EXISTS (SELECT 1 FROM jobs k WHERE k.idempotency_key = e->>'key') THEN
      -- its owner may not use that pool (migration 027); a repeated key still answers its job
      status := 'pool_refused';
      job_id := NULL;
      job := rung_submit_pool_refusal(e->>'owner', rung_submit_pool(e->'body'));
      target := NULL;
      current := NULL;
      RETURN NEXT;
      CONTINUE;
    END IF;
    v_after := NULL;
    v_when := NULL;
    v_waits := NULL;
    IF jsonb_typeof(e->'after') = 'array'
       AND NOT EXISTS (SELECT 1 FROM jobs k WHERE k.idempotency_key = e->>'key') THEN
      v_after := ARRAY(SELECT DISTINCT x.v::bigint FROM jsonb_array_elements_text(e->'after') x(v) ORDER BY 1);
      v_when := nullif(e->>'after_when', 'succeeded');
      -- a job named that does not exist (or is not the owner's), else one that already succeeded while
      -- this one is to run only after failures (migration 036): refused, nothing stored. The second is
      -- read once they are armed (locked): a success being committed is then either read here or sees
      -- this job when its trigger runs (a mark left on a refusal costs a probe at their ending)
      status := 'after_unknown';
      v_missing := rung_after_unknown(v_after, CASE WHEN (e->>'after_any')::boolean THEN NULL ELSE e->>'owner' END);
      IF v_missing IS NULL THEN
        v_waits := rung_after_arm_when(v_after, v_when);
        status := 'after_never';
        v_missing := rung_after_never(v_after, v_when);
      END IF;
      IF v_missing IS NOT NULL THEN
        job_id := NULL;
        job := jsonb_build_object('after', v_missing);
        target := NULL;
        current := NULL;
        RETURN NEXT;
        CONTINUE;
      END IF;
    END IF;
    INSERT INTO jobs (name, owner, kind, priority, target_config, current_config, recovery,
                      idempotency_key, request_hash, labels, state, run_after, pool, after_ids, after_when, waits_for,
                      next_action, start_by)
    VALUES (e->>'name', e->>'owner', e->>'kind', (e->>'priority')::int, e->'body'->'config',
            NULL, e->'recovery', e->>'key', h, rung_submit_labels(e->'body'),
            CASE WHEN v_run_after IS NULL AND v_waits IS NULL THEN 'queued' ELSE 'scheduled' END, v_run_after,
            rung_submit_pool(e->'body'), v_after, v_when, v_waits, rung_after_wait_text(v_waits, v_when),
            rung_submit_start_by(e))
    ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING * INTO j;
    IF NOT FOUND THEN
      SELECT * INTO j FROM jobs WHERE idempotency_key = e->>'key';
      status := CASE WHEN j.request_hash IS DISTINCT FROM h THEN 'conflict' ELSE 'existing' END;
    ELSE
      INSERT INTO event_log (job_id, kind, to_state, reason, data)
      VALUES (j.id, 'submitted', j.state, 'submitted', rung_submit_event_data(j.kind, j.priority, j.owner, j.run_after)
              || CASE WHEN v_after IS NULL THEN '{}'::jsonb
                      ELSE jsonb_build_object('after', v_after, 'waits_for', v_waits)
                           || CASE WHEN v_when IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('after_when', v_when) END END);
      created := created + 1;
      status := 'created';
    END IF;
    job_id := j.id;
    job := rung_job_json_lean(j) || CASE WHEN status = 'conflict' THEN '{}' ELSE rung_submit_pool_warning(j.pool) END;
    IF status <> 'conflict' AND j.waits_for IS NOT NULL THEN
      -- a job it runs after that failed or was cancelled holds it: said at once, beside the pool's
      job := job || (SELECT CASE WHEN jsonb_array_length(w) = 0 THEN '{}'::jsonb
                                 ELSE jsonb_build_object('warnings', coalesce(job->'warnings', '[]') || w) END
                     FROM rung_submit_after_warnings(j.waits_for) w);
    END IF;
    target := j.target_config::text;
    current := j.current_config::text;
    RETURN NEXT;
  END LOOP;
END $$;

-- A batch of jobs submitted together, all or none (POST /v1/jobs/batch). $1 is the coalescer's
-- array of one item, [{"i": 0, "jobs": [ITEM, ...], "request": {"jobs": [ENVELOPE, ...]}}], each ITEM
-- as rung_submit_batch takes it without its "body", which is job k's envelope in the request as it
-- was sent (so a config's 0.1 is stored as 0.1, not as a double printed again), with "_batch": the
-- md5 of the whole request's jobs, so that each job's request hash (an Idempotency-Key's check)
-- covers the whole batch: another batch under the same key, a job changed, added or left out,
-- conflicts at its first job. An ITEM may have "after_items": indexes of earlier jobs of the batch
-- that it runs after (rungd checked that each is earlier, so a batch holds no cycle), turned here
-- into their ids and added to its "after". Every job named by an "after" is locked first, in id
-- order, so that two batches naming the same jobs in another order wait rather than deadlock. A
-- batch without after_items is one call of rung_submit_batch (set-wise when no job has a key or
-- after); one with them goes job by job, in order, so that each knows the ids before it. Either
-- runs inside one block: the first refusal (pool_refused, after_unknown, after_never, or an
-- Idempotency-Key conflict) rolls back every job of the batch and is the only row, with i = the
-- index of the job refused. A repeat of the batch's key answers every job 'existing'; some existing
-- and some created means the key was used for another batch: 'conflict', naming the first existing
-- job, and nothing is stored. Otherwise one row per job, in order.
CREATE OR REPLACE FUNCTION rung_submit_group(p jsonb)
RETURNS TABLE (i int, status text, job_id bigint, job jsonb, target text, current text) LANGUAGE plpgsql AS $$
DECLARE
  e jsonb;
  r record;
  k int := 0;
  a_status text[] := '{}';
  a_id bigint[] := '{}';
  a_job jsonb[] := '{}';
  a_target text[] := '{}';
  a_current text[] := '{}';
  bad_i int;
  bad_status text;
  bad_id bigint;
  bad_job jsonb;
  v_jobs jsonb;
  v_batch jsonb := jsonb_build_object('_batch', md5((p->0->'request'->'jobs')::text)); -- once: 300 KB for 100 jobs
BEGIN
  SELECT coalesce(jsonb_agg(t.x || jsonb_build_object('body', rq.env || v_batch) ORDER BY t.o), '[]')
    INTO v_jobs
    FROM jsonb_array_elements(p->0->'jobs') WITH ORDINALITY t(x, o)
    JOIN jsonb_array_elements(p->0->'request'->'jobs') WITH ORDINALITY rq(env, ro) ON rq.ro = t.o;
  PERFORM 1 FROM jobs d
   WHERE d.id IN (SELECT a.v::bigint FROM jsonb_array_elements(v_jobs) x, jsonb_array_elements_text(x->'after') a(v)
                   WHERE jsonb_typeof(x->'after') = 'array')
   ORDER BY d.id FOR NO KEY UPDATE;
  BEGIN
    IF NOT EXISTS (SELECT 1 FROM jsonb_array_elements(v_jobs) x WHERE x ? 'after_items') THEN
      SELECT coalesce(array_agg(b.status ORDER BY b.i), '{}'), coalesce(array_agg(b.job_id ORDER BY b.i), '{}'),
             coalesce(array_agg(b.job ORDER BY b.i), '{}'), coalesce(array_agg(b.target ORDER BY b.i), '{}'),
             coalesce(array_agg(b.current ORDER BY b.i), '{}')
        INTO a_status, a_id, a_job, a_target, a_current
        FROM rung_submit_batch((SELECT jsonb_agg(x || jsonb_build_object('i', o - 1) ORDER BY o)
                                  FROM jsonb_array_elements(v_jobs) WITH ORDINALITY t(x, o))) b;
      SELECT min(o)::int - 1 INTO bad_i
        FROM unnest(a_status) WITH ORDINALITY u(s, o) WHERE s <> 'created' AND s <> 'existing';
      IF bad_i IS NOT NULL THEN
        bad_status := a_status[bad_i + 1]; bad_id := a_id[bad_i + 1]; bad_job := a_job[bad_i + 1];
        RAISE EXCEPTION USING ERRCODE = 'RG001';
      END IF;
    ELSE
      FOR e IN SELECT x FROM jsonb_array_elements(v_jobs) x LOOP
        IF jsonb_typeof(e->'after_items') = 'array' THEN
          e := jsonb_set(e, '{after}', coalesce(e->'after', '[]'::jsonb)
                                       || (SELECT jsonb_agg(a_id[x.v::int + 1]) FROM jsonb_array_elements_text(e->'after_items') x(v)));
        END IF;
        SELECT * INTO r FROM rung_submit_batch(jsonb_build_array((e - 'after_items') || jsonb_build_object('i', k))) b;
        IF r.status IS DISTINCT FROM 'created' AND r.status IS DISTINCT FROM 'existing' THEN
          bad_i := k; bad_status := r.status; bad_id := r.job_id; bad_job := r.job;
          RAISE EXCEPTION USING ERRCODE = 'RG001';
        END IF;
        a_status := a_status || r.status;
        a_id := a_id || r.job_id;
        a_job := a_job || r.job;
        a_target := a_target || r.target;
        a_current := a_current || r.current;
        k := k + 1;
      END LOOP;
    END IF;
    IF 'created' = ANY (a_status) AND 'existing' = ANY (a_status) THEN
      bad_i := array_position(a_status, 'existing') - 1;
      bad_status := 'conflict';
      bad_id := a_id[bad_i + 1];
      bad_job := a_job[bad_i + 1];
      RAISE EXCEPTION USING ERRCODE = 'RG001';
    END IF;
  EXCEPTION WHEN SQLSTATE 'RG001' THEN
    i := bad_i; status := bad_status; job_id := bad_id; job := bad_job; target := NULL; current := NULL;
    RETURN NEXT;
    RETURN;
  END;
  RETURN QUERY SELECT (u.o - 1)::int, u.s, u.id, u.j, u.t, u.c
               FROM unnest(a_status, a_id, a_job, a_target, a_current) WITH ORDINALITY u(s, id, j, t, c, o);
END $$;
