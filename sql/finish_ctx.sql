-- $1 attempt id, $2 token, $3 facts -> CTX or NULL when the fence fails
SELECT rung_finish_ctx($1::bigint, $2, $3::jsonb);
