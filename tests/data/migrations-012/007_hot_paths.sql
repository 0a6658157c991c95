-- Hot paths made cheaper, same results.
--
-- 1. Submits without an Idempotency-Key, the common case, are inserted set-wise: one INSERT of every
-- job of the batch and one INSERT of their `submitted` events, instead of a plpgsql loop running
-- both statements once per job (docs/PERFORMANCE.md: the per-statement overhead was most of a
-- submit's cost). A batch with any keyed item keeps the per-item loop of 004, which is what makes a
-- repeated key later in the same batch find the earlier job.

-- A JOB without its two configs; rungd splices the config text in (api_jobs.c) so that a submit
-- reply does not make Postgres copy a ~3 KB config into a new jsonb twice and print it twice.
CREATE FUNCTION rung_job_json_lean(j jobs) RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object(
    'id', j.id, 'name', j.name, 'state', j.state, 'kind', j.kind, 'priority', j.priority,
    'owner', j.owner, 'recovery', j.recovery, 'recovery_state', j.recovery_state, 'constraints', j.constraints,
    'attempts', j.attempts_count, 'lost_count', j.lost_count,
    'cancel_requested', j.cancel_requested, 'created_at', j.created_at, 'updated_at', j.updated_at,
    'finished_at', j.finished_at,
    'result', CASE WHEN j.result IS NULL OR j.result ? 'config' THEN j.result
                   ELSE j.result || jsonb_build_object('config', j.target_config) END,
    'next_action', j.next_action)
$$;

-- JOB (001) = the lean JOB and the two configs, current_config resolved (006: NULL is the target).
CREATE OR REPLACE FUNCTION rung_job_json(j jobs) RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT rung_job_json_lean(j) || jsonb_build_object('target_config', j.target_config,
                                                     'current_config', coalesce(j.current_config, j.target_config))
$$;

-- 2. A decision that adds no constraint (most of them: every success) no longer runs
-- rung_merge_constraints' two aggregate queries: only merges write constraints, so a job's lists
-- are already distinct and sorted (jsonb_agg DISTINCT), and the merge of nothing is their copy.
CREATE OR REPLACE FUNCTION rung_merge_constraints(old jsonb, new jsonb) RETURNS jsonb LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF coalesce(jsonb_typeof(new->'exclude_gpus') <> 'array' OR jsonb_array_length(new->'exclude_gpus') = 0, true)
     AND coalesce(jsonb_typeof(new->'exclude_workers') <> 'array' OR jsonb_array_length(new->'exclude_workers') = 0, true)
     AND coalesce(jsonb_typeof(new->'min_gpu_memory_mib') <> 'number', true)
     AND coalesce(jsonb_typeof(old->'exclude_gpus'), 'array') = 'array'
     AND coalesce(jsonb_typeof(old->'exclude_workers'), 'array') = 'array' THEN
    RETURN jsonb_build_object('exclude_gpus', coalesce(old->'exclude_gpus', '[]'),
                              'exclude_workers', coalesce(old->'exclude_workers', '[]'),
                              'min_gpu_memory_mib', coalesce(old->'min_gpu_memory_mib', 'null'));
  END IF;
  RETURN jsonb_build_object(
    'exclude_gpus', coalesce((SELECT jsonb_agg(DISTINCT x) FROM (
        SELECT jsonb_array_elements(CASE WHEN jsonb_typeof(old->'exclude_gpus') = 'array' THEN old->'exclude_gpus' ELSE '[]' END)
        UNION ALL
        SELECT jsonb_array_elements(CASE WHEN jsonb_typeof(new->'exclude_gpus') = 'array' THEN new->'exclude_gpus' ELSE '[]' END)) s(x)), '[]'),
    'exclude_workers', coalesce((SELECT jsonb_agg(DISTINCT x) FROM (
        SELECT jsonb_array_elements(CASE WHEN jsonb_typeof(old->'exclude_workers') = 'array' THEN old->'exclude_workers' ELSE '[]' END)
        UNION ALL
        SELECT jsonb_array_elements(CASE WHEN jsonb_typeof(new->'exclude_workers') = 'array' THEN new->'exclude_workers' ELSE '[]' END)) s(x)), '[]'),
    'min_gpu_memory_mib', CASE WHEN jsonb_typeof(new->'min_gpu_memory_mib') = 'number' THEN new->'min_gpu_memory_mib'
                               ELSE coalesce(old->'min_gpu_memory_mib', 'null') END);
END $$;

-- The set-wise insert: p is rung_submit_batch's array, none of it keyed. The ids are drawn first
-- (x is materialized, so nextval runs once per item) to tie each row back to its item.
CREATE FUNCTION rung_submit_set(p jsonb)
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
           x.e->'recovery', md5((x.e->'body')::text)
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

-- Submit many jobs (004), storing no current_config (006): set-wise when no item carries a key, else item by item. Rows: (i,
-- status "created" | "existing" | "conflict", the job's id, the lean JOB, target_config as text,
-- current_config as text or NULL when it is the target) per item; one NOTIFY per batch that
-- created a job.
DROP FUNCTION rung_submit_batch(jsonb);
CREATE FUNCTION rung_submit_batch(p jsonb)
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
    h := md5((e->'body')::text);
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
