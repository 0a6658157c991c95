-- $1 attempt id, $2 token, $3 lowered config, $4 reason, $5 data (recovery_state.started_lower)
-- -> the config text the worker runs, or NULL when the attempt no longer runs the job's target
SELECT rung_start_lower($1::bigint, $2, $3::jsonb, $4, $5::jsonb);
