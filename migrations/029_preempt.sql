-- Preemption of borrowed work: with rungd --preempt-after-s, a job a worker borrowed from another
-- pool (migration 028) is stopped when the worker's own pool has a queued job its GPU could run and
-- no idle GPU of that pool takes (sql/functions/44_preempt.sql). The attempt ends 'preempted' and
-- its job is queued again unchanged; it does not count against the job's budgets (recovery/policy.c).
-- preempted_at: when rungd asked for the stop (heartbeats then answer cancel and preempt);
-- preempt_for: the job of the worker's own pool it was made for. Both NULL otherwise: no row is
-- rewritten.
ALTER TABLE attempts ADD COLUMN preempted_at timestamptz, ADD COLUMN preempt_for bigint;
-- The outcome 'preempted'. NOT VALID: the new check allows every value the old one did, so the rows
-- already there need no reading while the migration's transaction holds the table; new and updated
-- rows are checked as ever.
ALTER TABLE attempts DROP CONSTRAINT attempts_outcome_check,
  ADD CONSTRAINT attempts_outcome_check CHECK (outcome IN ('succeeded', 'failed', 'cancelled', 'lost', 'preempted'))
  NOT VALID;
-- Whether a preemption was already made for a queued job (one stop per job, and none again for a
-- while when its GPU went to another: rung_preempt): a probe of the few attempts ever preempted.
CREATE INDEX attempts_preempt_for ON attempts (preempt_for) WHERE preempt_for IS NOT NULL;
