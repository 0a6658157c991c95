-- Jobs that start later (POST /v1/jobs "run_after" or "start_in_s"; rungctl submit --at/--in): a job
-- submitted with a start time in the future is stored in the state 'scheduled' with that time in
-- jobs.run_after, and no claim reads it (the claim reads only 'queued' jobs: sql/functions/40_claim.sql
-- and 41_claim_batch.sql are unchanged). rungd's scheduler (server/scheduler.c) moves the jobs whose
-- time has come to 'queued', oldest start time first, through jobs_scheduled (rung_start_due,
-- sql/functions/23_scheduled.sql); POST /v1/jobs/{id}/start does it for one job at once. run_after
-- stays after the job was started (when it was meant to start); it is NULL for a job never scheduled.
-- The state CHECK is widened: 001 wrote it inline, so Postgres named it jobs_state_check.
-- Validating it reads the jobs table once, under the migration's lock.
ALTER TABLE jobs ADD COLUMN run_after timestamptz;
ALTER TABLE jobs DROP CONSTRAINT jobs_state_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_state_check
  CHECK (state IN ('queued', 'scheduled', 'running', 'succeeded', 'failed', 'cancelled'));
-- The jobs due next, for the scheduler's statement (a walk from the earliest start time that stops at
-- the first one still ahead) and /metrics' count and lateness. Partial: a job has an entry only while
-- it is scheduled, so the claim and finish paths write no more index entries than before (their
-- updates already change the state, which other partial indexes' predicates read).
CREATE INDEX jobs_scheduled ON jobs (run_after) WHERE state = 'scheduled';
