-- What each attempt's trainer printed, as rung-worker sends it while the attempt runs (POST
-- /v1/attempts/{id}/log every --log-interval-ms), for `rungctl logs`, GET /v1/jobs/{id}/log and the
-- job page. A row is one chunk: bytes [byte_from, byte_to) of the worker's trainer.log, with the
-- progress-bar redraws a later redraw overwrote left out (worker/logship.h), so body is usually
-- shorter than the range. The key makes a resent chunk (its answer was lost) a no-op and gives
-- the order to read in; chunks follow each other without gaps (the worker sends the next one from
-- where the last accepted one ended).
--
-- No foreign key to attempts on purpose: its check would lock the attempt's row (a row lock writes
-- the heap page) on every chunk, beside the heartbeats that update that row. The insert is fenced
-- by (attempt id, token, running) instead, and retention deletes a job's chunks with its attempts
-- (rung_prune). Rows are append-only and never updated: the default fillfactor is right.
CREATE TABLE attempt_logs (
  attempt_id bigint NOT NULL,
  byte_from  bigint NOT NULL CHECK (byte_from >= 0),
  byte_to    bigint NOT NULL CHECK (byte_to > byte_from), -- an empty chunk would hold the next one's key
  at         timestamptz NOT NULL DEFAULT now(),
  body       text NOT NULL,
  PRIMARY KEY (attempt_id, byte_from)
);
