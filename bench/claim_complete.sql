-- pgbench: claim one queued row (FOR UPDATE SKIP LOCKED in a MATERIALIZED CTE, then UPDATE) and
-- complete it: two autocommit transactions per job, as a worker that runs a job in between would.
WITH c AS MATERIALIZED (
  SELECT id FROM bench_queue WHERE state = 'queued'
  ORDER BY priority, created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
UPDATE bench_queue q SET state = 'running', started_at = now()
FROM c WHERE q.id = c.id RETURNING q.id AS job_id \gset
UPDATE bench_queue SET state = 'done', finished_at = now() WHERE id = :job_id;
