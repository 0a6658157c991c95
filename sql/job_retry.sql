-- $1 job id, $2 from ('current' | 'target' | NULL: current), $3 note or NULL, $4 who ->
-- {"status": "ok" | "conflict", "job"} or NULL (sql/functions/22_job_ops.sql)
SELECT rung_retry($1::bigint, $2, $3, $4);
