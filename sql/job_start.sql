-- POST /v1/jobs/{id}/start and its /ui form: $1 job id, $2 who -> {"status": "ok" | "conflict", "job"}
-- or NULL (rung_start_now, sql/functions/23_scheduled.sql)
SELECT rung_start_now($1::bigint, $2);
