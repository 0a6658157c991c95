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
