-- $1 token id, $2 the checked body {"max_running"?, "pool_max_running"?} -> TOKEN or NULL when missing (rung_token_set_limits)
SELECT rung_token_set_limits($1::bigint, $2::jsonb);
