-- Baseline tables for `make bench`: the raw-Postgres ceilings rung is compared with.
-- bench_insert: one INSERT per transaction of a ~3 KB jsonb row (the submit baseline).
-- bench_queue: a minimal job queue for claim (FOR UPDATE SKIP LOCKED) + complete (the cycle baseline).
DROP TABLE IF EXISTS bench_insert;
CREATE TABLE bench_insert (
  id         bigserial PRIMARY KEY,
  state      text NOT NULL DEFAULT 'queued',
  priority   int NOT NULL DEFAULT 100,
  created_at timestamptz NOT NULL DEFAULT now(),
  payload    jsonb NOT NULL
);
DROP TABLE IF EXISTS bench_queue;
CREATE TABLE bench_queue (
  id          bigserial PRIMARY KEY,
  state       text NOT NULL DEFAULT 'queued',
  priority    int NOT NULL DEFAULT 100,
  created_at  timestamptz NOT NULL DEFAULT now(),
  started_at  timestamptz,
  finished_at timestamptz,
  payload     jsonb NOT NULL DEFAULT '{}'
) WITH (fillfactor = 80);
CREATE INDEX bench_queue_claim ON bench_queue (priority, created_at, id) WHERE state = 'queued';
