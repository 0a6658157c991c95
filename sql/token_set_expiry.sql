-- $1 token id, $2 seconds from now until it expires, or NULL (never) -> {"status": "ok" | "revoked",
-- "token": TOKEN} or NULL when missing (rung_token_set_expiry, sql/functions/90_tokens.sql)
SELECT rung_token_set_expiry($1::bigint, $2::int);
