-- $1 finishes [{"i", "id", "token", "facts", "plain"}] -> (i, CTX) for each whose attempt is the running one
-- with that token (no row when the fence fails)
SELECT i, ctx FROM rung_finish_ctx_batch($1::jsonb);
