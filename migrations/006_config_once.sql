-- Each job's AI Toolkit config (~3 KB) is stored once, as jobs.target_config, instead of being copied
-- into current_config at submit, into every attempt at claim and into the result at success; each
-- copy was a compressed, TOASTed write plus its WAL, the largest cost per attempt (docs/PERFORMANCE.md).
-- From here on a NULL means "the job's target_config":
--   jobs.current_config NULL      the next attempt runs the target (no rung applied, or scaled back up)
--   attempts.config NULL          the attempt ran the target
--   jobs.result without "config"  the run that succeeded ran the target
-- The JSON of the API (rung_attempt_json, rung_job_json, the lease) resolves them, so clients see
-- the same documents as before; the CTX sends them as NULL and rungd resolves them
-- (policy_ctx_resolve). The functions that write and read them are in sql/functions/.
-- Rows written before this migration keep their copies, which mean the same.

ALTER TABLE jobs ALTER COLUMN current_config DROP NOT NULL;
ALTER TABLE attempts ALTER COLUMN config DROP NOT NULL;

-- lz4 compresses the JSON that is still TOASTed (configs, FACTS, log tails, reports) several times
-- faster than the default pglz, where this server was built with it (new values only).
DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals)) THEN
    ALTER TABLE jobs ALTER COLUMN target_config SET COMPRESSION lz4,
                     ALTER COLUMN current_config SET COMPRESSION lz4,
                     ALTER COLUMN result SET COMPRESSION lz4;
    ALTER TABLE attempts ALTER COLUMN config SET COMPRESSION lz4,
                         ALTER COLUMN facts SET COMPRESSION lz4,
                         ALTER COLUMN log_tail SET COMPRESSION lz4;
    ALTER TABLE escalations ALTER COLUMN report SET COMPRESSION lz4,
                            ALTER COLUMN report_markdown SET COMPRESSION lz4;
  END IF;
END $$;
