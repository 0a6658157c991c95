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

-- Whether a worker of pool W_POOL that borrows from W_BORROW (migration 028) may take a job of pool
-- P_POOL: its own pool, or one it borrows from. The one place the rule is written: the claim
-- (41_claim_batch.sql, rung_claim_in), the pool's largest GPU, the placement, the plan and /metrics read
-- it. One expression, IMMUTABLE, so the planner inlines it in a query.
CREATE OR REPLACE FUNCTION rung_worker_takes(p_pool text, w_pool text, w_borrow text[]) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$ SELECT w_pool = p_pool OR p_pool = ANY (w_borrow) $$;

-- Register a worker (upsert by name) and its GPUs (upsert by uuid; their state is kept). P is the
-- registration: {"name", "host", "gpus", "version"?, "pool"?, "borrow"?}. The version it runs: absent or null
-- is none, and a re-registration replaces it, none included. Its pool (migration 026): absent keeps
-- a known worker's pool (what a rungd of the release before calls, through the wrappers below, during
-- a rollout) and puts a new one in 'default'; this release's rungd always sends it. P_TOKEN (NULL: no
-- binding, the tests' and the old unowned name's way) binds the worker to the calling token: a name
-- bound to another live token is refused unless P_ADMIN: {"status": "taken"}; a name whose token
-- was revoked may be taken over (a worker restarted with a new token); a token with a pool list
-- (migration 027) may join only those pools: {"status": "pool_refused", "pools", "field": "pool"}. The
-- pools it borrows from (migration 028): "borrow", an array of pool names checked by rungd; absent
-- keeps a known worker's (a rungd of the release before) and is none for a new one; this release's
-- rungd always sends it. A token kept to some pools may borrow only from those: {"status":
-- "pool_refused", "pools", "field": "borrow"}. Returns {"status": "ok", "id", "created": bool, "pool",
-- "borrow"}. One jsonb, so that the next field needs no new signature (why
-- signatures are not changed in place: the note at the top of this file).
CREATE OR REPLACE FUNCTION rung_worker_join(p jsonb, p_token bigint, p_admin boolean) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  v_name text := p->>'name';
  cur bigint;
  live boolean;
  w_id bigint;
  w_pool text;
  w_borrow text[];
  v_pools text[];
  created boolean;
BEGIN
  IF p_token IS NOT NULL THEN
    SELECT w.token_id, t.revoked_at IS NULL INTO cur, live
    FROM workers w LEFT JOIN tokens t ON t.id = w.token_id WHERE w.name = v_name FOR UPDATE OF w;
    IF cur IS NOT NULL AND cur <> p_token AND live AND NOT p_admin THEN
      RETURN jsonb_build_object('status', 'taken');
    END IF;
    -- the pools its token may use (migration 027): a host cannot join a pool kept for others
    SELECT t.pools INTO v_pools FROM tokens t WHERE t.id = p_token;
    IF v_pools IS NOT NULL AND NOT coalesce(p->>'pool', 'default') = ANY (v_pools) THEN
      RETURN jsonb_build_object('status', 'pool_refused', 'pools', to_jsonb(v_pools), 'field', 'pool');
    END IF;
    IF v_pools IS NOT NULL AND EXISTS (SELECT 1 FROM jsonb_array_elements_text(coalesce(p->'borrow', '[]')) b
                                       WHERE NOT b = ANY (v_pools)) THEN
      RETURN jsonb_build_object('status', 'pool_refused', 'pools', to_jsonb(v_pools), 'field', 'borrow');
    END IF;
  END IF;
  INSERT INTO workers AS w (name, host, version, pool, borrow, token_id)
  VALUES (v_name, coalesce(p->>'host', ''), p->>'version', coalesce(p->>'pool', 'default'),
          ARRAY(SELECT jsonb_array_elements_text(coalesce(p->'borrow', '[]'))), p_token)
  -- a worker drained from the control plane stays drained when it restarts (31_drain.sql)
  ON CONFLICT (name) DO UPDATE SET host = excluded.host, last_seen_at = now(), version = excluded.version,
                                   pool = CASE WHEN p ? 'pool' THEN excluded.pool ELSE w.pool END,
                                   borrow = CASE WHEN p ? 'borrow' THEN excluded.borrow ELSE w.borrow END,
                                   token_id = coalesce(p_token, w.token_id),
                                   state = CASE WHEN w.state = 'draining' THEN 'draining' ELSE 'online' END
  RETURNING w.id, w.pool, w.borrow, (xmax = 0) INTO w_id, w_pool, w_borrow, created;
  INSERT INTO gpus AS g (uuid, worker_id, idx, name, memory_total_mib)
  SELECT x->>'uuid', w_id, coalesce((x->>'index')::int, 0), coalesce(x->>'name', ''),
         coalesce((x->>'memory_total_mib')::int, 0)
  FROM jsonb_array_elements(coalesce(p->'gpus', '[]')) x
  ON CONFLICT (uuid) DO UPDATE SET worker_id = excluded.worker_id, idx = excluded.idx,
    name = excluded.name, memory_total_mib = excluded.memory_total_mib, updated_at = now();
  RETURN jsonb_build_object('status', 'ok', 'id', w_id, 'created', created, 'pool', w_pool,
                            'borrow', to_jsonb(w_borrow));
END $$;

-- The names of migration 024's release, with its signatures, for its rungd during a rollout (above):
-- its pool kept. Returns {"id", "created"}, and "status" for the owned one, as they did.
CREATE OR REPLACE FUNCTION rung_worker_register(p_name text, p_host text, p_gpus jsonb, p_version text)
RETURNS jsonb LANGUAGE sql AS $$
  SELECT rung_worker_join(jsonb_build_object('name', p_name, 'host', p_host, 'gpus', p_gpus, 'version', p_version),
                          NULL, false) - 'status' - 'pool' - 'borrow'
$$;
CREATE OR REPLACE FUNCTION rung_worker_register_owned(p_name text, p_host text, p_gpus jsonb, p_token bigint,
                                                      p_admin boolean, p_version text) RETURNS jsonb
LANGUAGE sql AS $$
  SELECT rung_worker_join(jsonb_build_object('name', p_name, 'host', p_host, 'gpus', p_gpus, 'version', p_version),
                          p_token, p_admin) - 'pool' - 'borrow'
$$;

-- The names of migration 023's release, with its signatures, for its rungd during a rollout (above):
-- registered without a version.
CREATE OR REPLACE FUNCTION rung_register(p_name text, p_host text, p_gpus jsonb) RETURNS jsonb
LANGUAGE sql AS $$ SELECT rung_worker_register(p_name, p_host, p_gpus, NULL) $$;
CREATE OR REPLACE FUNCTION rung_register_owned(p_name text, p_host text, p_gpus jsonb, p_token bigint,
                                               p_admin boolean) RETURNS jsonb
LANGUAGE sql AS $$ SELECT rung_worker_register_owned(p_name, p_host, p_gpus, p_token, p_admin, NULL) $$;
