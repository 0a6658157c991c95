-- Borrowing between pools: a worker of pool A may also take the queued jobs of pools it names
-- (rung-worker --borrow b,c), in that order, when A has none it may run, so that the H200 hosts kept
-- for video jobs do not idle while the default pool has a queue. A claim round serves every pool's own
-- GPUs first, then the borrowers (sql/functions/41_claim_batch.sql); a borrowed job runs to its end
-- (no preemption). A constant default: no row is rewritten.
ALTER TABLE workers ADD COLUMN borrow text[] NOT NULL DEFAULT '{}';
-- The workers that borrow: a claim round looks for borrowers only when there is one (an empty
-- index's probe otherwise).
CREATE INDEX workers_borrowing ON workers (id) WHERE borrow <> '{}';
