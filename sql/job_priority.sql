-- $1 job id, $2 priority, $3 who -> {"status": "ok" | "conflict", "job"} or NULL
-- (sql/functions/22_job_ops.sql)
SELECT rung_set_priority($1::bigint, $2::int, $3);
