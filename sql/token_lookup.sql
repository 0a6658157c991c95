-- $1 hex SHA-256 of a bearer token -> id, name, role of the live token (no row when unknown or revoked)
SELECT id, name, role FROM tokens WHERE hash = $1 AND revoked_at IS NULL;
