-- One claim round of 16 GPUs (rung_claim_batch; pgbench -D fair=true|false: rungd --fair-share), rolled
-- back so that every run finds the same queue.
BEGIN;
SELECT count(*) FROM rung_claim_batch((SELECT jsonb_agg(jsonb_build_object('i', i, 'worker', w.id, 'gpu', 'G-' || i, 'fresh', true))
                                       FROM generate_series(1, 16) i, workers w WHERE w.name = 'bench-w'), 30, :fair);
ROLLBACK;
