-- $1 hex SHA-256 of a bearer token -> id, name, role of the token not revoked (no row when unknown
-- or revoked), then, when it expires (NULLs when never): the milliseconds left by the database's
-- clock (<= 0: expired) and the instant in UTC ("2030-01-31T12:00:00Z"), for the refusal's message
SELECT id, name, role,
       floor(extract(epoch FROM expires_at - now()) * 1000)::bigint,
       to_char(expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
FROM tokens WHERE hash = $1 AND revoked_at IS NULL;
