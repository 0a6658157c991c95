-- GPU-hour quotas per owner (migration 035): tokens.gpu_hours over the last gpu_hours_days days. What
-- each owner with a quota used is read here, by rungd's periodic pass (server/quota.c, every
-- --quota-interval-ms) and at once when an admin sets a quota, and stored in quota_use; the claim
-- reads only quota_use.over (rung_owner_room_now, 40_claim.sql), so a claim never sums GPU time. A
-- quota is a budget, not a lock: the jobs a claim started before the pass saw the owner over it, and
-- the owner's running jobs, may take it past the quota; none starts after. A quota per pool (migration
-- 037: tokens.pool_gpu_hours, over the same window) is read by the same pass, from the same scan.

-- The advisory lock that keeps the passes of several replicas from reading the same usage at once
-- (a pass that finds it taken skips: the other one reads it).
CREATE OR REPLACE FUNCTION rung_quota_lock() RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
  SELECT 7240535::bigint
$$;

-- The GPU seconds the attempts of P_OWNER's jobs took in the last P_DAYS days: each attempt holds one
-- GPU from its lease to its end (a running one: to now), the part inside the window counted, as GET
-- /v1/usage counts it (sql/usage.sql). The owner's jobs by jobs_owner_id, their attempts by job:
-- O(the owner's jobs kept), read by the pass, never by a claim.
CREATE OR REPLACE FUNCTION rung_owner_gpu_s(p_owner text, p_days int) RETURNS double precision
LANGUAGE sql STABLE AS $$
  SELECT coalesce(sum(extract(epoch FROM coalesce(a.ended_at, now())
                                         - greatest(a.started_at, now() - make_interval(days => p_days)))), 0)::float8
  FROM jobs j JOIN attempts a ON a.job_id = j.id
  WHERE j.owner = p_owner AND coalesce(a.ended_at, now()) > now() - make_interval(days => p_days)
$$;

-- The same per pool (migration 037): {"POOL": GPU seconds} of P_OWNER's jobs of each pool (the pool
-- a job was queued in, wherever it ran), in one pass over the same rows; {} for none.
CREATE OR REPLACE FUNCTION rung_owner_gpu_s_pools(p_owner text, p_days int) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT coalesce(jsonb_object_agg(x.pool, x.s), '{}') FROM (
    SELECT j.pool, sum(extract(epoch FROM coalesce(a.ended_at, now())
                                           - greatest(a.started_at, now() - make_interval(days => p_days))))::float8 AS s
    FROM jobs j JOIN attempts a ON a.job_id = j.id
    WHERE j.owner = p_owner AND coalesce(a.ended_at, now()) > now() - make_interval(days => p_days)
    GROUP BY j.pool) x
$$;

-- Reads token P_TOKEN's use of its quotas now into quota_use (its row dropped when it has none or was
-- revoked), and, for a session that asks for job webhooks (rung.job_webhook), writes a quota webhook
-- row per crossing it finds (rung_quota_event, migration 038) -> {"owner", "over", "was_over", "used_s", "pools_over", "was_pools_over"}: whether it is over
-- its quota over every pool now and was at the last read, and the pools of its quotas per pool
-- (migration 037) it is over now and was. NULL when there is no such token.
CREATE OR REPLACE FUNCTION rung_quota_read(p_token bigint) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  t tokens;
  was boolean;
  was_pools text[];
  pools jsonb;
  used double precision;
  over boolean;
  pools_over text[];
BEGIN
  SELECT * INTO t FROM tokens WHERE id = p_token;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  -- one read of this token's use at a time (the pass, an admin's change): a crossing is written once.
  -- Not the token's row lock, which a claim round holds (quota_use is a table of its own for that).
  PERFORM pg_advisory_xact_lock(rung_quota_lock()::int, (p_token % 2147483647)::int);
  SELECT coalesce(u.over, false), coalesce(u.pools_over, '{}') INTO was, was_pools FROM quota_use u WHERE u.token_id = p_token;
  was := coalesce(was, false);
  was_pools := coalesce(was_pools, '{}');
  IF (t.gpu_hours IS NULL AND t.pool_gpu_hours IS NULL) OR t.revoked_at IS NOT NULL THEN
    -- (a quota lifted frees its owner: the pass logs it and wakes the GPUs; no webhook, an admin did it)
    DELETE FROM quota_use WHERE token_id = p_token;
    RETURN jsonb_build_object('owner', t.name, 'over', false, 'was_over', was, 'used_s', NULL,
                              'pools_over', '[]'::jsonb, 'was_pools_over', to_jsonb(was_pools));
  END IF;
  pools := rung_owner_gpu_s_pools(t.name, t.gpu_hours_days);
  used := coalesce((SELECT sum(v.value::float8) FROM jsonb_each_text(pools) v), 0);
  over := coalesce(used >= t.gpu_hours * 3600, false);
  pools_over := ARRAY(SELECT q.key FROM jsonb_each_text(coalesce(t.pool_gpu_hours, '{}')) q
                      WHERE coalesce((pools->>q.key)::float8, 0) >= q.value::float8 * 3600 ORDER BY q.key);
  INSERT INTO quota_use (token_id, used_s, over, read_at, pool_used, pools_over)
  VALUES (p_token, used, over, now(), pools, pools_over)
  ON CONFLICT (token_id) DO UPDATE SET used_s = EXCLUDED.used_s, over = EXCLUDED.over, read_at = EXCLUDED.read_at,
                                       pool_used = EXCLUDED.pool_used, pools_over = EXCLUDED.pools_over;
  IF current_setting('rung.job_webhook', true) = 'on' THEN
    -- the job webhook's URL hears of each crossing, read by the pass or at a change (migration 038)
    INSERT INTO webhook_outbox (kind, payload)
    SELECT 'quota', rung_quota_event(x.who, x.over_now) FROM (
      -- (a quota lifted, over every pool or in one pool, sends nothing: an admin did it)
      SELECT t.name AS who, over AS over_now WHERE over IS DISTINCT FROM was AND t.gpu_hours IS NOT NULL
      UNION ALL SELECT t.name || '/' || p, true FROM unnest(pools_over) p WHERE NOT p = ANY (was_pools)
      UNION ALL SELECT t.name || '/' || p, false FROM unnest(was_pools) p
                WHERE NOT p = ANY (pools_over) AND t.pool_gpu_hours ? p) x;
  END IF;
  RETURN jsonb_build_object('owner', t.name, 'over', over, 'was_over', was, 'used_s', used,
                            'pools_over', to_jsonb(pools_over), 'was_pools_over', to_jsonb(was_pools));
END $$;

-- The periodic pass (server/quota.c): reads every quota, and drops what is left of those lifted ->
-- {"read": n, "capped": [owners over their quota since this pass, and "owner/POOL" for a quota per
-- pool], "freed": [those back under it]; rungd logs both and wakes the parked GPUs for the freed};
-- {"read": 0, ..., "skipped": true} when another replica's pass holds rung_quota_lock.
CREATE OR REPLACE FUNCTION rung_quota_pass() RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  r jsonb;
  n int := 0;
  capped text[] := '{}';
  freed text[] := '{}';
BEGIN
  IF NOT pg_try_advisory_xact_lock(rung_quota_lock()) THEN
    RETURN jsonb_build_object('read', 0, 'capped', '[]'::jsonb, 'freed', '[]'::jsonb, 'skipped', true);
  END IF;
  FOR r IN SELECT rung_quota_read(t.id) FROM tokens t
           WHERE t.gpu_hours IS NOT NULL OR t.pool_gpu_hours IS NOT NULL
              OR EXISTS (SELECT 1 FROM quota_use u WHERE u.token_id = t.id)
           ORDER BY t.id LOOP
    n := n + 1;
    IF (r->>'over')::boolean AND NOT (r->>'was_over')::boolean THEN
      capped := capped || (r->>'owner');
    ELSIF NOT (r->>'over')::boolean AND (r->>'was_over')::boolean THEN
      freed := freed || (r->>'owner');
    END IF;
    capped := capped || ARRAY(SELECT (r->>'owner') || '/' || p FROM jsonb_array_elements_text(r->'pools_over') p
                              WHERE NOT (r->'was_pools_over') ? p ORDER BY p);
    freed := freed || ARRAY(SELECT (r->>'owner') || '/' || p FROM jsonb_array_elements_text(r->'was_pools_over') p
                            WHERE NOT (r->'pools_over') ? p ORDER BY p);
  END LOOP;
  RETURN jsonb_build_object('read', n, 'capped', to_jsonb(capped), 'freed', to_jsonb(freed));
END $$;

-- An owner's quota as the placement, GET /v1/owners and /metrics show it: {"gpu_hours", "days",
-- "used_hours" (one decimal; null before the first read), "over", "read_at"}, or NULL when its token
-- has none.
CREATE OR REPLACE FUNCTION rung_owner_quota(p_owner text) RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object('gpu_hours', t.gpu_hours, 'days', t.gpu_hours_days,
                            'used_hours', round((u.used_s / 3600)::numeric, 1), 'over', coalesce(u.over, false),
                            'read_at', u.read_at)
  FROM tokens t LEFT JOIN quota_use u ON u.token_id = t.id
  WHERE t.name = p_owner AND t.gpu_hours IS NOT NULL
$$;

-- An owner's quotas per pool (migration 037) as the placement, GET /v1/owners and /metrics show them:
-- [{"pool", "gpu_hours", "days", "used_hours" (one decimal; 0 for a pool it has not used, null before
-- the first read), "over", "read_at"}] by pool, or NULL when its token has none.
CREATE OR REPLACE FUNCTION rung_owner_pool_quotas(p_owner text) RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT jsonb_agg(jsonb_build_object('pool', q.key, 'gpu_hours', q.value::real, 'days', t.gpu_hours_days,
                                      'used_hours', CASE WHEN u.token_id IS NOT NULL
                                                         THEN round((coalesce((u.pool_used->>q.key)::float8, 0) / 3600)::numeric, 1) END,
                                      'over', coalesce(q.key = ANY (u.pools_over), false), 'read_at', u.read_at)
                   ORDER BY q.key)
  FROM tokens t CROSS JOIN LATERAL jsonb_each_text(t.pool_gpu_hours) q LEFT JOIN quota_use u ON u.token_id = t.id
  WHERE t.name = p_owner AND t.pool_gpu_hours IS NOT NULL
$$;

-- The payload of a quota webhook (migration 038) for WHO ("team-a", or "team-a/h200" for a quota per
-- pool) gone over its quota (P_OVER) or back under it: {"event": "quota.over" | "quota.under", "owner",
-- "pool" (null over every pool), "gpu_hours", "days", "used_hours", "ui", "at": when it was read, so a
-- receiver can order a quota.over and a quota.under delivered out of order}, from what was just read.
CREATE OR REPLACE FUNCTION rung_quota_event(who text, p_over boolean) RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object('event', CASE WHEN p_over THEN 'quota.over' ELSE 'quota.under' END,
                            'owner', split_part(who, '/', 1), 'pool', nullif(split_part(who, '/', 2), ''))
         || coalesce(CASE WHEN position('/' IN who) = 0 THEN rung_owner_quota(who) - 'over' - 'read_at'
                          ELSE (SELECT q - 'pool' - 'over' - 'read_at'
                                FROM jsonb_array_elements(rung_owner_pool_quotas(split_part(who, '/', 1))) q
                                WHERE q->>'pool' = split_part(who, '/', 2)) END, '{}')
         || jsonb_build_object('ui', '/ui/gpus', 'at', now())
$$;
