-- $1 job id, $2 who, $3 note or NULL -> {"status": "ok" | "conflict", "job"} or NULL
-- (sql/functions/44_preempt.sql)
SELECT rung_requeue($1::bigint, $2, $3);
