-- $1 token id, $2 max_running or NULL -> TOKEN or NULL when missing (rung_token_set_limit)
SELECT rung_token_set_limit($1::bigint, $2::int);
