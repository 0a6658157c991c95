-- Worker pools: a job runs only on a worker of its pool (POST /v1/jobs "pool", rungctl submit --pool;
-- rung-worker --pool), so a cluster can keep its H200 hosts for video jobs, a team's own hosts for
-- that team, or a canary pool for a new trainer image. Both default to 'default': a fleet that names
-- no pool works as before. The claim reads one pool at a time (sql/functions/41_claim_batch.sql), so
-- the pool heads both claim indexes: a GPU of pool B reads B's queue, never the jobs of pool A ahead
-- of it. The indexes keep their names (the functions' comments and docs/PERFORMANCE.md cite them).
-- A constant default: adding the columns rewrites no row.
ALTER TABLE jobs ADD COLUMN pool text NOT NULL DEFAULT 'default';
ALTER TABLE workers ADD COLUMN pool text NOT NULL DEFAULT 'default';
DROP INDEX jobs_claim;
CREATE INDEX jobs_claim ON jobs (pool, priority, created_at, id) WHERE state = 'queued';
DROP INDEX jobs_claim_owner;
CREATE INDEX jobs_claim_owner ON jobs (pool, owner, priority, created_at, id) WHERE state = 'queued';
-- The workers outside the default pool: a claim round reads its waiters' pools only when there is
-- one (an empty index's probe otherwise).
CREATE INDEX workers_pooled ON workers (pool) WHERE pool <> 'default';
