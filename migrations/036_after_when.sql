-- When a job that runs after others may start (POST /v1/jobs "after_when"; rungctl submit --after-when):
--   after_when: NULL, the default: once every job it runs after has succeeded (migration 033);
--               'ended':  once every one has ended, whatever its outcome (succeeded, failed or cancelled);
--               'failed': once every one has failed or was cancelled (a fallback or a report of a
--                         failure); the success of one of them cancels the job (it would never start).
-- Read by the trigger that releases waiting jobs (rung_after_release, sql/functions/23_scheduled.sql),
-- which now fires on every ending of a job with dependents. NULL for every existing row: no row is rewritten.
ALTER TABLE jobs ADD COLUMN after_when text CHECK (after_when IN ('ended', 'failed'));
