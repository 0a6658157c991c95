-- Workers: register (upsert by name, with its GPUs), bound to the calling token.

-- Why new names, not new arguments (migration 024 added the version): a rungd of the release
-- before calls rung_register(3) and rung_register_owned(5) while a rollout replaces it, and a
-- rungd rolled back to it applies its own copy of this file again at start. Beside an overload of
-- the same name with a defaulted extra argument, Postgres finds those calls ambiguous ("function
-- is not unique") and the old release could no longer register a worker. So the old names keep
-- their signatures, as wrappers, and this release calls the new names. (The overloads a build
-- of this release briefly had are dropped.)
DROP FUNCTION IF EXISTS rung_register(text, text, jsonb, text);
DROP FUNCTION IF EXISTS rung_register_owned(text, text, jsonb, bigint, boolean, text);

-- Register a worker (upsert by name) and its GPUs (upsert by uuid; their state is kept), with the
-- version it runs (NULL: it sent none; a re-registration replaces the version, NULL included).
-- Returns {"id", "created": bool}.
CREATE OR REPLACE FUNCTION rung_worker_register(p_name text, p_host text, p_gpus jsonb, p_version text)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  w_id bigint;
  created boolean;
BEGIN
  INSERT INTO workers AS w (name, host, version) VALUES (p_name, p_host, p_version)
  -- a worker drained from the control plane stays drained when it restarts (31_drain.sql)
  ON CONFLICT (name) DO UPDATE SET host = excluded.host, last_seen_at = now(), version = excluded.version,
                                   state = CASE WHEN w.state = 'draining' THEN 'draining' ELSE 'online' END
  RETURNING w.id, (xmax = 0) INTO w_id, created;
  INSERT INTO gpus AS g (uuid, worker_id, idx, name, memory_total_mib)
  SELECT x->>'uuid', w_id, coalesce((x->>'index')::int, 0), coalesce(x->>'name', ''),
         coalesce((x->>'memory_total_mib')::int, 0)
  FROM jsonb_array_elements(coalesce(p_gpus, '[]')) x
  ON CONFLICT (uuid) DO UPDATE SET worker_id = excluded.worker_id, idx = excluded.idx,
    name = excluded.name, memory_total_mib = excluded.memory_total_mib, updated_at = now();
  RETURN jsonb_build_object('id', w_id, 'created', created);
END $$;

-- Register a worker as rung_worker_register does, bound to the calling token. A name bound to another
-- live token is refused unless the caller is an admin: {"status": "taken"}. A name whose token
-- was revoked may be taken over (a worker restarted with a new token).
CREATE OR REPLACE FUNCTION rung_worker_register_owned(p_name text, p_host text, p_gpus jsonb, p_token bigint,
                                                      p_admin boolean, p_version text) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  cur bigint;
  live boolean;
  doc jsonb;
BEGIN
  SELECT w.token_id, t.revoked_at IS NULL INTO cur, live
  FROM workers w LEFT JOIN tokens t ON t.id = w.token_id WHERE w.name = p_name FOR UPDATE OF w;
  IF cur IS NOT NULL AND cur <> p_token AND live AND NOT p_admin THEN
    RETURN jsonb_build_object('status', 'taken');
  END IF;
  doc := rung_worker_register(p_name, p_host, p_gpus, p_version);
  UPDATE workers SET token_id = p_token WHERE id = (doc->>'id')::bigint;
  RETURN doc || jsonb_build_object('status', 'ok');
END $$;

-- The names of the release before, with its signatures, for its rungd during a rollout (above):
-- registered without a version.
CREATE OR REPLACE FUNCTION rung_register(p_name text, p_host text, p_gpus jsonb) RETURNS jsonb
LANGUAGE sql AS $$ SELECT rung_worker_register(p_name, p_host, p_gpus, NULL) $$;
CREATE OR REPLACE FUNCTION rung_register_owned(p_name text, p_host text, p_gpus jsonb, p_token bigint,
                                               p_admin boolean) RETURNS jsonb
LANGUAGE sql AS $$ SELECT rung_worker_register_owned(p_name, p_host, p_gpus, p_token, p_admin, NULL) $$;
