-- Tokens that stop working by themselves: tokens.expires_at (NULL: never). Set once, at creation
-- (POST /v1/tokens {"expires_in_s"}, rungctl token create --expires, rungd token create --expires),
-- from the database's clock: expires_at = now() + the given seconds. From that instant rungd
-- refuses the token everywhere a revoked one is refused (401 token_expired), checked against the
-- expires_at its token cache holds at every request (server/auth.c), not only when the cache is
-- read again. An expired token keeps its row, its name (names are never reused) and its jobs, as
-- a revoked one does. No index: the token lookup goes by hash.
ALTER TABLE tokens ADD COLUMN expires_at timestamptz;
