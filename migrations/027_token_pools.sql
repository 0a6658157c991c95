-- The worker pools a token may use (migration 026): NULL, the default, any pool; else a job its owner
-- submits or moves must be in one of them, and a worker registering with it must join one (the H200
-- hosts a team paid for take only that team's jobs, and no other host joins their pool). Set by an
-- admin: POST /v1/tokens/{id}/pools (sql/functions/90_tokens.sql). No row is rewritten.
ALTER TABLE tokens ADD COLUMN pools text[];
