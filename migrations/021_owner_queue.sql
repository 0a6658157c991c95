-- The queue per owner: queued jobs by (owner, claim order). While some owner is at its running-job
-- limit (migration 020), a claim reads the other owners' queues from here and merges them in claim
-- order (rung_queue_head, sql/functions/40_claim.sql) instead of passing over the capped owner's
-- queued jobs in jobs_claim: with 100,000 of them queued in front a round took 39 ms, not 1.3 ms
-- (docs/PERFORMANCE.md, round 13). Partial like jobs_claim: a job gets an entry when it is queued
-- (a submit, a re-queue), none when it is claimed or ends.
CREATE INDEX jobs_claim_owner ON jobs (owner, priority, created_at, id) WHERE state = 'queued';
