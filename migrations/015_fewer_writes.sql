-- Fewer index entries and rows per attempt (issue 13; docs/PERFORMANCE.md, "What Postgres writes per attempt").
-- The event history is kept, stored in fewer rows: `events` becomes a view over `event_log` (the rows written) and
-- `attempts` (every attempt's `leased` event, which repeated the attempt's own columns). A finish writes one row
-- that carries the job's transition; the view shows it as the two events it used to be. Indexes whose entries every
-- state change rewrote and no query needs are dropped or made partial. The functions, the view and its trigger
-- are in sql/functions/ (15_events.sql, 20_submit.sql, 40_claim.sql, 41_claim_batch.sql, 50_heartbeat_batch.sql,
-- 62_finish_apply_batch.sql).

-- Events: the table is event_log; `events` becomes the view every reader kept using (sql/functions/15_events.sql).
ALTER TABLE events RENAME TO event_log;
ALTER INDEX events_job RENAME TO event_log_job;
-- The log is only read by job (event_log_job); its ids come from events_id_seq. No primary key: an entry per row
-- that nothing looked up.
ALTER TABLE event_log DROP CONSTRAINT events_pkey;
ALTER TABLE attempts ADD COLUMN lease_event_id bigint;                 -- NULL for attempts whose leased row is in the log
ALTER TABLE attempts ALTER COLUMN lease_event_id SET DEFAULT nextval('events_id_seq');

-- The view `events` and its insert trigger are in sql/functions/15_events.sql.

-- Jobs: every claim and every finish rewrote every index of the job (its state is in jobs_claim's predicate, so
-- no job update is HOT). Keyless jobs (most) no longer have an idempotency entry; (state, id) was only for listing
-- by state: listing the common states walks the primary key backwards, the rare end states keep an index.
ALTER TABLE jobs DROP CONSTRAINT jobs_idempotency_key_key;
CREATE UNIQUE INDEX jobs_idempotency_key ON jobs (idempotency_key) WHERE idempotency_key IS NOT NULL;
DROP INDEX jobs_state_id;
CREATE INDEX jobs_ended_badly ON jobs (id) WHERE state IN ('failed', 'cancelled');

-- Attempts: (job_id, number) serves every lookup by job; (job_id, config_hash) repeated it.
DROP INDEX attempts_job_config;

-- Room on each page for the new versions of heartbeats and state changes (HOT where no indexed column changes).
ALTER TABLE gpus SET (fillfactor = 80);
ALTER TABLE workers SET (fillfactor = 70);
