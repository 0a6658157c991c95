-- The `capped` scenario's queue (bench/capped.sh; psql -v nbig=N): N queued jobs of owner bench-big in
-- front, 1,000 of five other owners behind, one worker with 32 GPUs, and a history of 20,000 jobs that
-- ended with an attempt each (without one, the planner reads the attempts table, empty to its
-- statistics, whole, and the rounds rolled back fill it with dead rows); no limit set.
TRUNCATE jobs, attempts, event_log, gpus, workers, gpu_faults, escalations, webhook_outbox CASCADE;
DELETE FROM tokens WHERE name LIKE 'bench-%';
INSERT INTO tokens (name, role, hash)
  SELECT n, 'submitter', md5(n) || md5(n) FROM unnest(ARRAY['bench-big', 'bench-1', 'bench-2', 'bench-3', 'bench-4', 'bench-5']) n;
SELECT rung_register('bench-w', 'h',
  (SELECT jsonb_agg(jsonb_build_object('uuid', 'G-' || i, 'memory_total_mib', 80000)) FROM generate_series(1, 32) i));
INSERT INTO jobs (name, owner, kind, priority, target_config, recovery, created_at)
  SELECT 'big-' || i, 'bench-big', 'image', 0, '{"x": 1}', '{}', now() - interval '1 day' + i * interval '1 ms'
  FROM generate_series(1, :nbig) i;
INSERT INTO jobs (name, owner, kind, priority, target_config, recovery, created_at)
  SELECT 'small-' || i, 'bench-' || (1 + i % 5), 'image', 0, '{"x": 1}', '{}', now() + i * interval '1 ms'
  FROM generate_series(1, 1000) i;
INSERT INTO jobs (name, owner, kind, state, priority, target_config, recovery, attempts_count, created_at)
  SELECT 'done-' || i, 'bench-' || (1 + i % 5), 'image', 'succeeded', 0, '{"x": 1}', '{}', 1, now() - interval '2 days'
  FROM generate_series(1, 20000) i;
INSERT INTO attempts (job_id, number, worker_id, gpu_uuid, config, config_hash, token, lease_expires_at, state, outcome, ended_at)
  SELECT j.id, 1, w.id, 'G-' || (1 + j.id % 32), '{"x": 1}', md5('{"x": 1}'), 'done' || j.id, now(), 'ended',
         CASE WHEN j.id % 10 = 0 THEN 'failed' ELSE 'succeeded' END, now()
  FROM jobs j, workers w WHERE j.state = 'succeeded' AND w.name = 'bench-w';
VACUUM ANALYZE jobs;
VACUUM ANALYZE attempts;
