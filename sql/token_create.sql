-- $1 name or NULL, $2 role, $3 hex SHA-256 of the secret, $4 seconds until it expires or NULL (never)
-- -> {"status", "token"?}
SELECT rung_token_issue($1, $2, $3, $4::int);
