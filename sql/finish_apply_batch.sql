-- $1 decisions [{"i", "id", "token", "facts", "decision", "report"}] in attempt id order
-- -> (i, reply or NULL when fenced out)
SELECT i, doc FROM rung_finish_apply_batch($1::jsonb);
