-- POST /v1/attempts/{id}/log (server/api_logs.c): $1 attempt id, $2 token, $3 byte_from, $4 byte_to,
-- $5 body -> (stored, end) (rung_log_put, sql/functions/52_attempt_log.sql); no row when the fence
-- (id, token, running) fails.
SELECT stored, end_at FROM rung_log_put($1::bigint, $2::text, $3::bigint, $4::bigint, $5::text);
