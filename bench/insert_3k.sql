-- pgbench: one INSERT per transaction of the ~3 KB AI Toolkit config, sent as a parameter
-- (run with -M prepared -D payload="$(jq -c . bench/flux_lora_3k.json)").
INSERT INTO bench_insert (payload) VALUES (:payload::jsonb);
