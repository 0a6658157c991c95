-- $1 job id, $2 pool, $3 who -> {"status": "ok" | "conflict", "job"} or NULL
-- (sql/functions/22_job_ops.sql)
SELECT rung_set_pool($1::bigint, $2, $3);
