-- $1 heartbeats [{"i", "id", "token", "phase", "step", "total", "mem"}] (distinct ids), $2 lease
-- seconds -> (i, cancel_requested, preempt) for each whose fence held
SELECT i, cancel, preempt FROM rung_heartbeats($1::jsonb, $2::int);
