-- From here on each function (and trigger) is defined once, under sql/functions/, and applied after
-- the migrations on every `rungd migrate` whose files changed (server/migrate.c): migrations hold
-- only the schema. This drops the functions that nothing calls any more, on a database whose
-- earlier migrations created them: rung_finish_ctx (the CTX of one attempt: rungd and the tests use
-- rung_finish_ctx_batch), and the ones an older database may still hold, which later migrations
-- of the old tree dropped (rung_submit before 006, rung_finish_ctx_fleet before 010,
-- rung_claim_eligible before 012).
DROP FUNCTION IF EXISTS rung_finish_ctx(bigint, text, jsonb);
DROP FUNCTION IF EXISTS rung_submit(text, text, text, int, jsonb, jsonb, text, text);
DROP FUNCTION IF EXISTS rung_finish_ctx_fleet(bigint, text, jsonb, int);
DROP FUNCTION IF EXISTS rung_claim_eligible(bigint, jsonb, bigint, text, int);
