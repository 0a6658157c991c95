-- $1 attempt id, $2 token, $3 the memory floor (MiB) for the job's next attempts, $4 reason,
-- $5 data (recovery_state.started_bigger) -> true when the claim was undone and the job re-queued
-- for a bigger GPU, false when the attempt no longer runs the job's target (answer as claimed)
SELECT rung_start_bigger($1::bigint, $2, $3::int, $4, $5::jsonb);
