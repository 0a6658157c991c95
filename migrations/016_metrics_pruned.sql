-- What retention deleted still counts in /metrics (sql/functions/75_prune.sql adds to it,
-- sql/metrics_history.sql adds it back): per kind of count and its labels, the total the deleted
-- rows made. Without it the history's counters would fall at each prune, and Prometheus reads a
-- fall as a reset (rate() then jumps by the whole count).
--   kind 'job': label1 the state;  'attempt': label1 outcome, label2 class;  'rung': label1 the rung;
--   'lease_wait_le': label1 a bucket's bound (float8 as text);  'lease_wait': label1 'sum' or 'count'.
CREATE TABLE metrics_pruned (
  kind   text NOT NULL,
  label1 text NOT NULL,
  label2 text NOT NULL DEFAULT '',
  n      double precision NOT NULL DEFAULT 0,
  PRIMARY KEY (kind, label1, label2)
);
