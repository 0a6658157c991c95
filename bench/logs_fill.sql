-- The `logs` scenario's attempts (bench/logs.sh): 16 running attempts, one per pgbench client, whose
-- trainers print; the history behind them is what a fleet keeps (20,000 ended attempts, their
-- jobs). bench_log_bare is attempt_logs' twin for the baseline: the same row with no fence and no
-- look-up of where the log ends.
TRUNCATE jobs, attempts, event_log, gpus, workers, gpu_faults, escalations, webhook_outbox, attempt_logs CASCADE;
INSERT INTO jobs (name, kind, state, target_config, recovery, attempts_count)
  SELECT 'log-' || i, 'image', CASE WHEN i <= 16 THEN 'running' ELSE 'succeeded' END, '{"x": 1}', '{}', 1
  FROM generate_series(1, 20016) i;
INSERT INTO attempts (id, job_id, number, config, config_hash, token, lease_expires_at, state, outcome)
  SELECT j.id, j.id, 1, '{"x": 1}', md5('{"x": 1}'), 'bench-token', now() + interval '1 day',
         CASE WHEN j.state = 'running' THEN 'running' ELSE 'ended' END,
         CASE WHEN j.state = 'running' THEN NULL ELSE 'succeeded' END
  FROM jobs j;
SELECT setval(pg_get_serial_sequence('attempts', 'id'), (SELECT max(id) FROM attempts));
DROP TABLE IF EXISTS bench_log_bare;
CREATE TABLE bench_log_bare (LIKE attempt_logs INCLUDING ALL);
VACUUM ANALYZE jobs;
VACUUM ANALYZE attempts;
