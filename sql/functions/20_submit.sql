-- Submit: many jobs in one statement (server/batch.c gathers the POST /v1/jobs calls that arrive
-- close together). A job stores its config once, as target_config; current_config stays NULL (the
-- target) until a rung changes it (migrations/006, docs/PERFORMANCE.md).

-- A submit's labels (the envelope's "labels", checked by rungd: common/labels.h); {} when it has none.
CREATE OR REPLACE FUNCTION rung_submit_labels(body jsonb) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN jsonb_typeof(body->'labels') = 'object' THEN body->'labels' ELSE '{}'::jsonb END
$$;

-- The set-wise insert, for a batch where no item carries an Idempotency-Key (the common case): one
-- INSERT of every job and one of their `submitted` events. The ids are drawn first (x is
-- materialized, so nextval runs once per item) to tie each row back to its item. Only keyed
-- submits store a request_hash: it is compared only when a later submit repeats the key, and
-- printing a ~3 KB body to hash it was about 7 % of Postgres' time per submit.
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
    INSERT INTO jobs (id, name, owner, kind, priority, target_config, current_config, recovery, request_hash, labels)
    SELECT x.id, x.e->>'name', x.e->>'owner', x.e->>'kind', (x.e->>'priority')::int, x.e->'body'->'config', NULL,
           x.e->'recovery', NULL, rung_submit_labels(x.e->'body')
    FROM x ORDER BY x.id
    RETURNING *),
  ev AS (
    INSERT INTO event_log (job_id, kind, to_state, reason, data)
    SELECT ins.id, 'submitted', 'queued', 'submitted',
           jsonb_build_object('kind', ins.kind, 'priority', ins.priority, 'owner', ins.owner)
    FROM ins ORDER BY ins.id)
  SELECT x.i, 'created'::text, ins.id, rung_job_json_lean(ins::jobs), ins.target_config::text, NULL::text
  FROM x JOIN ins ON ins.id = x.id ORDER BY x.i;
END $$;

-- Submit many jobs: p is [{"i", "name", "owner", "kind", "priority", "recovery", "key", "body"}]
-- (key: the owner-scoped Idempotency-Key or null; body: the request, whose "config" is the job's
-- config). Set-wise (rung_submit_set) when no item carries a key; else item by item, in array
-- order, each an insert-or-return-existing (the same request hash: md5 of the body as jsonb text),
-- so a repeated key later in the same batch finds the earlier job. Rows: (i, status "created" |
-- "existing" | "conflict", the job's id, the lean JOB, target_config as text, current_config as
-- text or NULL when it is the target) per item; rungd splices the configs into the JOB. No NOTIFY:
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
  created int := 0;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM jsonb_array_elements(p) k WHERE jsonb_typeof(k->'key') = 'string') THEN
    RETURN QUERY SELECT * FROM rung_submit_set(p);
    RETURN;
  END IF;
  FOR e IN SELECT x FROM jsonb_array_elements(p) x LOOP
    i := (e->>'i')::int;
    h := CASE WHEN jsonb_typeof(e->'key') = 'string' THEN md5((e->'body')::text) END;
    INSERT INTO jobs (name, owner, kind, priority, target_config, current_config, recovery,
                      idempotency_key, request_hash, labels)
    VALUES (e->>'name', e->>'owner', e->>'kind', (e->>'priority')::int, e->'body'->'config',
            NULL, e->'recovery', e->>'key', h, rung_submit_labels(e->'body'))
    ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING * INTO j;
    IF NOT FOUND THEN
      SELECT * INTO j FROM jobs WHERE idempotency_key = e->>'key';
      status := CASE WHEN j.request_hash IS DISTINCT FROM h THEN 'conflict' ELSE 'existing' END;
    ELSE
      INSERT INTO event_log (job_id, kind, to_state, reason, data)
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
END $$;
