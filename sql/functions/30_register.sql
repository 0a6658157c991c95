-- Workers: register (upsert by name, with its GPUs), bound to the calling token.

-- Register a worker (upsert by name) and its GPUs (upsert by uuid; their state is kept), with the
-- version it runs (NULL: it sent none; a re-registration replaces the version, NULL included).
-- Returns {"id", "created": bool}. (p_version came with migration 024, with a default so that the
-- three-argument calls of a rungd from before it still resolve here; the old signature is dropped
-- first: beside this one, a three-argument call would be ambiguous.)
DROP FUNCTION IF EXISTS rung_register(text, text, jsonb);
CREATE OR REPLACE FUNCTION rung_register(p_name text, p_host text, p_gpus jsonb, p_version text DEFAULT NULL)
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

-- Register a worker as rung_register does, bound to the calling token. A name bound to another
-- live token is refused unless the caller is an admin: {"status": "taken"}. A name whose token
-- was revoked may be taken over (a worker restarted with a new token). (p_version: as rung_register's,
-- and with a default for the same reason: a rungd from before migration 024 calls it with five
-- arguments while a rollout replaces it, and registers its workers without a version.)
DROP FUNCTION IF EXISTS rung_register_owned(text, text, jsonb, bigint, boolean);
CREATE OR REPLACE FUNCTION rung_register_owned(p_name text, p_host text, p_gpus jsonb, p_token bigint,
                                    p_admin boolean, p_version text DEFAULT NULL) RETURNS jsonb
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
  doc := rung_register(p_name, p_host, p_gpus, p_version);
  UPDATE workers SET token_id = p_token WHERE id = (doc->>'id')::bigint;
  RETURN doc || jsonb_build_object('status', 'ok');
END $$;
