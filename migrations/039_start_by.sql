-- A job's start deadline (POST /v1/jobs "start_by" / "start_within_s"; rungctl submit --start-by /
-- --start-within): a job that has not started by then (queued or scheduled, no attempt yet) is
-- cancelled by the scheduler (rung_start_deadline_due, sql/functions/23_scheduled.sql), as Slurm's
-- --deadline drops work that can no longer be of use. Once its first attempt started the deadline is
-- spent (kept, for the record); a retry clears it. NULL for every existing row: no row is rewritten.
ALTER TABLE jobs ADD COLUMN start_by timestamptz;
-- The scheduler's walk: only the jobs with a deadline that have not started, earliest first; a job
-- without one has no entry, so the claim and every other write of a job pay nothing for it.
CREATE INDEX jobs_start_by ON jobs (start_by)
  WHERE start_by IS NOT NULL AND state IN ('queued', 'scheduled') AND attempts_count = 0;
