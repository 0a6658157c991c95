-- $1 finishes [{"i", "id", "token", "facts"}] -> (i, CTX or NULL when the fence fails)
SELECT i, ctx FROM rung_finish_ctx_batch($1::jsonb);
