-- Bearer tokens (stored as the hex SHA-256 of the secret): create and revoke.

-- Create a token (name defaults to ROLE-ID) that expires p_expires_in_s seconds from now (NULL:
-- never; 60 to 315360000, as POST /v1/tokens checks). Returns {"status": "created", "token": TOKEN}
-- or {"status": "exists"} when the name is taken (revoked and expired tokens keep their names:
-- owners stay unique). A new name for the new argument (migration 023), not an overload: see
-- 30_register.sql; rung_token_create keeps the release before's signature, below.
DROP FUNCTION IF EXISTS rung_token_create(text, text, text, int);
CREATE OR REPLACE FUNCTION rung_token_issue(p_name text, p_role text, p_hash text, p_expires_in_s int)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  t tokens;
  v_id bigint := nextval(pg_get_serial_sequence('tokens', 'id'));
BEGIN
  IF p_expires_in_s IS NOT NULL AND (p_expires_in_s < 60 OR p_expires_in_s > 315360000) THEN
    RAISE EXCEPTION 'expires_in_s must be from 60 to 315360000, not %', p_expires_in_s;
  END IF;
  INSERT INTO tokens (id, name, role, hash, expires_at)
  VALUES (v_id, coalesce(p_name, p_role || '-' || v_id), p_role, p_hash,
          now() + make_interval(secs => p_expires_in_s))
  ON CONFLICT (name) DO NOTHING
  RETURNING * INTO t;
  IF NOT FOUND THEN RETURN jsonb_build_object('status', 'exists'); END IF;
  RETURN jsonb_build_object('status', 'created', 'token', rung_token_json(t));
END $$;

-- The release before's name and signature, for its rungd during a rollout: a token that never expires.
CREATE OR REPLACE FUNCTION rung_token_create(p_name text, p_role text, p_hash text) RETURNS jsonb
LANGUAGE sql AS $$ SELECT rung_token_issue(p_name, p_role, p_hash, NULL) $$;

-- Revoke by id (p_key all digits) or else by name; repeating is a no-op. Returns TOKEN or NULL when
-- missing. A key of digits is an id only: a token named so before names of digits were refused
-- (auth_name_new_ok) is revoked by its id, and the key never names two tokens.
CREATE OR REPLACE FUNCTION rung_token_revoke(p_key text) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  t tokens;
BEGIN
  UPDATE tokens SET revoked_at = coalesce(revoked_at, now())
  WHERE CASE WHEN p_key ~ '^[0-9]{1,18}$' THEN id = p_key::bigint ELSE name = p_key END
  RETURNING * INTO t;
  IF NOT FOUND THEN RETURN NULL; END IF;
  RETURN rung_token_json(t);
END $$;

-- Set the most jobs of token p_id's owner that may run at once (NULL: no limit; 0: none starts):
-- rung_token_set_limits, below, for max_running alone, by the name and signature the release before
-- migration 034 calls (its sql/token_set_limit.sql). Returns TOKEN, or NULL when missing.
CREATE OR REPLACE FUNCTION rung_token_set_limit(p_id bigint, p_max_running int) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  RETURN rung_token_set_limits(p_id, jsonb_build_object('max_running', p_max_running));
END $$;

-- Set token p_id's limits (POST /v1/tokens/{id}/limits, server/api_tokens.c, which checks the body and
-- logs who set them: the audit of a limit is rungd's log, not an event):
-- P_BODY's "max_running" when present (N, or null: none), and its "pool_max_running" when present:
-- null lifts every per-pool limit; {"POOL": N | null, ...} sets (N) or lifts (null) the limit of
-- each pool named, leaving the others as they were (migration 034); its "gpu_hours" (N, or null: no
-- quota) and "gpu_hours_days" (the window, 1 to 90) when present, the owner's use read at once
-- (rung_quota_read, migration 035); its "pool_gpu_hours" when present, merged as "pool_max_running"
-- (migration 037: quotas per pool, over the same window). Returns TOKEN, or NULL when
-- missing. The claim reads them at its next round (rung_owner_room, 40_claim.sql); jobs running
-- now run on. Waits for the claims under way (rung_owner_limits_lock), so that none of them still
-- goes by the old limits, or by none, once this one committed.
-- A token's map of pools P_OLD ({"POOL": N}: pool_limits, pool_gpu_hours) once P_BODY's P_KEY is
-- applied: absent, as it was; an object, merged in (a pool given null lifted, one not named left as it
-- was); anything else (null), none. NULL for an empty map.
CREATE OR REPLACE FUNCTION rung_pools_merge(p_old jsonb, p_body jsonb, p_key text) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN NOT p_body ? p_key THEN p_old
              WHEN jsonb_typeof(p_body->p_key) = 'object'
              THEN nullif(jsonb_strip_nulls(coalesce(p_old, '{}') || (p_body->p_key)), '{}') END
$$;

CREATE OR REPLACE FUNCTION rung_token_set_limits(p_id bigint, p_body jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  t tokens;
BEGIN
  PERFORM pg_advisory_xact_lock(rung_owner_limits_lock());
  SELECT * INTO t FROM tokens WHERE id = p_id FOR UPDATE;
  IF NOT FOUND THEN RETURN NULL; END IF;
  UPDATE tokens SET max_running = CASE WHEN p_body ? 'max_running' THEN (p_body->>'max_running')::int
                                       ELSE max_running END,
                    pool_limits = rung_pools_merge(t.pool_limits, p_body, 'pool_max_running'),
                    gpu_hours = CASE WHEN p_body ? 'gpu_hours' THEN (p_body->>'gpu_hours')::real ELSE gpu_hours END,
                    gpu_hours_days = coalesce((p_body->>'gpu_hours_days')::int, gpu_hours_days),
                    pool_gpu_hours = rung_pools_merge(t.pool_gpu_hours, p_body, 'pool_gpu_hours')
  WHERE id = p_id RETURNING * INTO t;
  IF p_body ?| '{gpu_hours,gpu_hours_days,pool_gpu_hours}' THEN
    PERFORM rung_quota_read(p_id); -- the new quota holds from this commit, not from the next pass
  END IF;
  RETURN rung_token_json(t);
END $$;

-- Set when token p_id expires (POST /v1/tokens/{id}/expiry): P_EXPIRES_IN_S seconds from now (60 to
-- 315360000, as rung_token_issue checks), or never (NULL). A token that expired may be given time again
-- (the hosts whose worker token ran out, working again without a new secret to hand out); a revoked one
-- may not: {"status": "revoked"}. Returns {"status": "ok", "token": TOKEN}, or NULL when missing. The
-- replicas' token caches see it within their TTL (auth.c); the one that ran it forgets the token at once.
CREATE OR REPLACE FUNCTION rung_token_set_expiry(p_id bigint, p_expires_in_s int) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  t tokens;
BEGIN
  IF p_expires_in_s IS NOT NULL AND (p_expires_in_s < 60 OR p_expires_in_s > 315360000) THEN
    RAISE EXCEPTION 'expires_in_s must be from 60 to 315360000, not %', p_expires_in_s;
  END IF;
  SELECT * INTO t FROM tokens WHERE id = p_id FOR UPDATE;
  IF NOT FOUND THEN RETURN NULL; END IF;
  IF t.revoked_at IS NOT NULL THEN
    RETURN jsonb_build_object('status', 'revoked', 'token', rung_token_json(t));
  END IF;
  UPDATE tokens SET expires_at = now() + make_interval(secs => p_expires_in_s) WHERE id = p_id RETURNING * INTO t;
  RETURN jsonb_build_object('status', 'ok', 'token', rung_token_json(t));
END $$;

-- Set the worker pools token p_id may use (migration 027): P_POOLS (a set of pool names, checked by
-- rungd; sorted and without repeats here) or NULL, any pool. What its jobs are already in stays; a
-- submit, a move and a registration are checked from now on (rung_pool_allowed). Returns TOKEN, or
-- NULL when missing.
CREATE OR REPLACE FUNCTION rung_token_set_pools(p_id bigint, p_pools text[]) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  t tokens;
BEGIN
  UPDATE tokens SET pools = (SELECT array_agg(DISTINCT x ORDER BY x) FROM unnest(p_pools) x) WHERE id = p_id
  RETURNING * INTO t;
  IF NOT FOUND THEN RETURN NULL; END IF;
  RETURN rung_token_json(t);
END $$;

-- Whether the token named P_NAME (a job's owner, or a worker's token) may use pool P_POOL: it has no
-- pool list, or the pool is in it; true for a name no token has (a job whose token was deleted).
-- One probe of tokens' name. The submit (20_submit.sql), the move (rung_set_pool) and the
-- registration (rung_worker_join) read it.
CREATE OR REPLACE FUNCTION rung_pool_allowed(p_name text, p_pool text) RETURNS boolean LANGUAGE sql STABLE AS $$
  SELECT coalesce((SELECT t.pools IS NULL OR p_pool = ANY (t.pools) FROM tokens t WHERE t.name = p_name), true)
$$;
