-- $1 job id -> JOB or NULL
SELECT rung_cancel($1::bigint);
