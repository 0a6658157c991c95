-- $1 heartbeats [{"i", "id", "token", "phase", "step", "total", "mem"}] (distinct ids), $2 lease
-- seconds -> (i, cancel_requested) for each whose fence held
SELECT i, cancel FROM rung_heartbeat_batch($1::jsonb, $2::int);
