-- Jobs that run after others (POST /v1/jobs "after": [ids]; rungctl submit --after): a job submitted
-- to run once other jobs have succeeded waits in the state 'scheduled' (migration 025), which no
-- claim reads, until the last of them succeeds (sql/functions/23_scheduled.sql rung_after_release,
-- a trigger on the jobs it waits for), or someone starts it at once (POST /v1/jobs/{id}/start).
--   after_ids:      the jobs it runs after, as submitted (sorted, distinct); NULL for none. Kept.
--   waits_for:      those of them that have not succeeded yet; NULL once none is left (then only a
--                   start time, run_after, may still hold it). Shrinks as they succeed.
--   has_dependents: some job was submitted to run after this one: the trigger that releases them
--                   fires only for such a job, so a success without dependents costs nothing more.
-- Both new columns of jobs are NULL or false for every existing row: no row is rewritten.
ALTER TABLE jobs ADD COLUMN after_ids bigint[];
ALTER TABLE jobs ADD COLUMN waits_for bigint[];
ALTER TABLE jobs ADD COLUMN has_dependents boolean NOT NULL DEFAULT false;
-- The jobs that wait for a given one (waits_for @> ARRAY[id]): the release on its success, and
-- retention, which keeps a job that a waiting job still needs. Partial: only waiting jobs have
-- entries, so the claim and finish paths write no entry of it.
CREATE INDEX jobs_waits_for ON jobs USING gin (waits_for) WHERE waits_for IS NOT NULL;
