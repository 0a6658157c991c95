-- rung's schema: jobs, attempts, workers, gpus (+ env faults), events, escalations. The PL/pgSQL
-- functions that make each HTTP call one statement (one round trip, one transaction) live once
-- each under sql/functions/, applied after the migrations (docs/DESIGN.md, "SQL").
-- Hot rows (attempts heartbeats) update only unindexed columns so the updates stay HOT.

CREATE TABLE workers (
  id           bigserial PRIMARY KEY,
  name         text NOT NULL UNIQUE,
  host         text NOT NULL DEFAULT '',
  state        text NOT NULL DEFAULT 'online' CHECK (state IN ('online', 'draining', 'offline')),
  created_at   timestamptz NOT NULL DEFAULT now(),
  last_seen_at timestamptz NOT NULL DEFAULT now()
) WITH (fillfactor = 80);

CREATE TABLE gpus (
  uuid             text PRIMARY KEY,
  worker_id        bigint REFERENCES workers (id),
  idx              int NOT NULL DEFAULT 0,
  name             text NOT NULL DEFAULT '',
  memory_total_mib int NOT NULL DEFAULT 0,
  state            text NOT NULL DEFAULT 'ok' CHECK (state IN ('ok', 'suspect', 'quarantined')),
  reason           text,
  released_at      timestamptz,
  updated_at       timestamptz NOT NULL DEFAULT now()
);

-- One row per environment fault seen on a GPU; the policy counts them in a time window.
CREATE TABLE gpu_faults (
  id         bigserial PRIMARY KEY,
  gpu_uuid   text NOT NULL REFERENCES gpus (uuid),
  job_id     bigint,
  attempt_id bigint,
  at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX gpu_faults_gpu_at ON gpu_faults (gpu_uuid, at);

CREATE TABLE jobs (
  id               bigserial PRIMARY KEY,
  name             text NOT NULL DEFAULT '',
  owner            text NOT NULL DEFAULT 'anonymous',
  kind             text NOT NULL CHECK (kind IN ('image', 'video')),
  state            text NOT NULL DEFAULT 'queued'
                   CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
  priority         int NOT NULL DEFAULT 100,
  target_config    jsonb NOT NULL,
  current_config   jsonb NOT NULL,
  recovery         jsonb NOT NULL,
  recovery_state   jsonb NOT NULL DEFAULT '{}',
  constraints      jsonb NOT NULL DEFAULT '{}',
  idempotency_key  text UNIQUE,
  request_hash     text,
  cancel_requested boolean NOT NULL DEFAULT false,
  attempts_count   int NOT NULL DEFAULT 0,
  lost_count       int NOT NULL DEFAULT 0,
  result           jsonb,
  next_action      text,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  finished_at      timestamptz
) WITH (fillfactor = 80, autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 100,
        autovacuum_analyze_scale_factor = 0.02);
-- The claim scan: only queued jobs, in claim order.
CREATE INDEX jobs_claim ON jobs (priority, created_at, id) WHERE state = 'queued';
CREATE INDEX jobs_state_id ON jobs (state, id);

CREATE TABLE attempts (
  id                bigserial PRIMARY KEY,
  job_id            bigint NOT NULL REFERENCES jobs (id),
  number            int NOT NULL,
  worker_id         bigint REFERENCES workers (id),
  gpu_uuid          text,
  config            jsonb NOT NULL,
  config_hash       text NOT NULL,
  token             text NOT NULL,
  lease_expires_at  timestamptz NOT NULL,          -- never indexed: heartbeats stay HOT
  last_heartbeat_at timestamptz,
  state             text NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'ended', 'lost')),
  outcome           text CHECK (outcome IN ('succeeded', 'failed', 'cancelled', 'lost')),
  phase             text,
  step              int,
  total_steps       int,
  memory_used_mib   int,
  class             text,
  rule              text,
  evidence          jsonb,
  action            text,
  rung              text,
  changes           jsonb,
  facts             jsonb,                          -- FACTS without log_tail
  log_tail          jsonb,
  gpu_before        jsonb,
  started_at        timestamptz NOT NULL DEFAULT now(),
  ended_at          timestamptz,
  UNIQUE (job_id, number)
) WITH (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 100,
        autovacuum_analyze_scale_factor = 0.02);
-- A job never has two running attempts at once.
CREATE UNIQUE INDEX attempts_one_running ON attempts (job_id) WHERE state = 'running';
CREATE INDEX attempts_job_config ON attempts (job_id, config_hash);
CREATE INDEX attempts_succeeded_hash ON attempts (config_hash) WHERE outcome = 'succeeded';

CREATE TABLE events (
  id         bigserial PRIMARY KEY,
  job_id     bigint,                                -- null for fleet events
  attempt_id bigint,
  kind       text NOT NULL,
  from_state text,
  to_state   text,
  reason     text,
  data       jsonb,
  at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX events_job ON events (job_id, id);

CREATE TABLE escalations (
  id              bigserial PRIMARY KEY,
  job_id          bigint NOT NULL REFERENCES jobs (id),
  attempt_id      bigint,
  trigger         text NOT NULL,
  state           text NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'acknowledged', 'resolved')),
  summary         text,
  recommendation  text,
  report_markdown text,
  report          jsonb,
  note            text,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX escalations_state ON escalations (state, id);
CREATE INDEX escalations_job ON escalations (job_id);
