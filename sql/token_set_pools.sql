-- $1 token id, $2 the pools as a JSON array of names, or NULL (any pool) -> TOKEN or NULL when missing
-- (rung_token_set_pools, sql/functions/90_tokens.sql)
SELECT rung_token_set_pools($1::bigint, CASE WHEN $2::jsonb IS NULL THEN NULL
                                             ELSE ARRAY(SELECT jsonb_array_elements_text($2::jsonb)) END);
