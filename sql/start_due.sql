-- rungd's scheduler (server/scheduler.c): $1 most jobs -> (job_id, run_after) per scheduled job it
-- queued because its start time came, the earliest first (sql/functions/23_scheduled.sql)
SELECT job_id, run_after FROM rung_start_due($1::int);
