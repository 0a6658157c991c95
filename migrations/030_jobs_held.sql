-- The checkpoint hold (recovery/resume.h, sql/functions/40_claim.sql): a job queued again after an
-- OOM whose checkpoint is on one worker's host carries constraints.hold {"worker_id", "until"}. A
-- claim round adds the queued jobs held for its waiters' workers to the jobs it weighs (41_claim_batch.sql),
-- so that the hold's worker takes its job even when older jobs come first in the queue: one probe of
-- this index, which holds only the few held jobs (the lease drops the hold).
CREATE INDEX jobs_held ON jobs (((constraints->'hold'->>'worker_id')::bigint))
  WHERE state = 'queued' AND constraints ? 'hold';
