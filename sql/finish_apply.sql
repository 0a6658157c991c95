-- $1 attempt id, $2 token, $3 facts, $4 decision, $5 report or NULL -> reply or NULL when fenced out
SELECT rung_finish_apply($1::bigint, $2, $3::jsonb, $4::jsonb, $5::jsonb);
