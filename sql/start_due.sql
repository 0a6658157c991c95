-- rungd's scheduler (server/scheduler.c), one statement a tick: $1 most jobs of each kind ->
-- (what, job_id, at): 'cancelled' for each job whose start deadline passed before it started (at: its
-- start_by; rung_start_deadline_due, migration 039), then 'queued' for each scheduled job queued
-- because its start time came (at: its run_after; rung_start_due, which never queues a job past its
-- deadline), each the earliest first (sql/functions/23_scheduled.sql)
SELECT 'cancelled' AS what, job_id, start_by AS at FROM rung_start_deadline_due($1::int)
UNION ALL
SELECT 'queued', job_id, run_after FROM rung_start_due($1::int);
