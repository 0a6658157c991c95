-- $1 worker id, $2 drain (true) or resume (false), $3 note or NULL, $4 who ->
-- {"changed", "worker"} or NULL (sql/functions/31_drain.sql)
SELECT rung_worker_drain($1::bigint, $2::boolean, $3, $4);
