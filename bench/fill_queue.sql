-- Refills bench_queue with :rows queued rows before each claim+complete run (psql -v rows=N).
TRUNCATE bench_queue;
INSERT INTO bench_queue (priority, payload)
SELECT 100, jsonb_build_object('n', g) FROM generate_series(1, :rows) g;
VACUUM ANALYZE bench_queue;
