-- Bearer tokens and who owns what: tokens are stored only as the hex SHA-256 of the secret (the
-- secret is shown once, at creation), with a name, a role and created/revoked times. A worker row
-- is bound to the token that registered it; a job's owner is the name of the token that submitted it.

CREATE TABLE tokens (
  id         bigserial PRIMARY KEY,
  name       text NOT NULL UNIQUE CHECK (name ~ '^[A-Za-z0-9._@-]{1,64}$'),
  role       text NOT NULL CHECK (role IN ('submitter', 'worker', 'support', 'admin')),
  hash       text NOT NULL UNIQUE CHECK (hash ~ '^[0-9a-f]{64}$'),
  created_at timestamptz NOT NULL DEFAULT now(),
  revoked_at timestamptz
);

ALTER TABLE workers ADD COLUMN token_id bigint REFERENCES tokens (id);
-- A submitter lists only its own jobs.
CREATE INDEX jobs_owner_id ON jobs (owner, id);

-- The API shape of a token: never the hash.
CREATE FUNCTION rung_token_json(t tokens) RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object('id', t.id, 'name', t.name, 'role', t.role, 'created_at', t.created_at,
                            'revoked_at', t.revoked_at, 'revoked', t.revoked_at IS NOT NULL)
$$;

-- Create a token (name defaults to ROLE-ID). Returns {"status": "created", "token": TOKEN} or
-- {"status": "exists"} when the name is taken (revoked tokens keep their names: owners stay unique).
CREATE FUNCTION rung_token_create(p_name text, p_role text, p_hash text) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  t tokens;
  v_id bigint := nextval(pg_get_serial_sequence('tokens', 'id'));
BEGIN
  INSERT INTO tokens (id, name, role, hash)
  VALUES (v_id, coalesce(p_name, p_role || '-' || v_id), p_role, p_hash)
  ON CONFLICT (name) DO NOTHING
  RETURNING * INTO t;
  IF NOT FOUND THEN RETURN jsonb_build_object('status', 'exists'); END IF;
  RETURN jsonb_build_object('status', 'created', 'token', rung_token_json(t));
END $$;

-- Revoke by id or name (p_key); repeating is a no-op. Returns TOKEN or NULL when missing.
CREATE FUNCTION rung_token_revoke(p_key text) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  t tokens;
BEGIN
  UPDATE tokens SET revoked_at = coalesce(revoked_at, now())
  WHERE (p_key ~ '^[0-9]{1,18}$' AND id = p_key::bigint) OR name = p_key
  RETURNING * INTO t;
  IF NOT FOUND THEN RETURN NULL; END IF;
  RETURN rung_token_json(t);
END $$;

-- Register a worker as rung_register does, bound to the calling token. A name bound to another
-- live token is refused unless the caller is an admin: {"status": "taken"}. A name whose token
-- was revoked may be taken over (a worker restarted with a new token).
CREATE FUNCTION rung_register_owned(p_name text, p_host text, p_gpus jsonb, p_token bigint,
                                    p_admin boolean) RETURNS jsonb LANGUAGE plpgsql AS $$
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
  doc := rung_register(p_name, p_host, p_gpus);
  UPDATE workers SET token_id = p_token WHERE id = (doc->>'id')::bigint;
  RETURN doc || jsonb_build_object('status', 'ok');
END $$;
