-- $1 worker id, $2 note or NULL, $3 who -> {"changed", "worker", "requeued"}, {"unavailable": true},
-- or NULL: drains it and stops its running attempts, each queued again unchanged when it ends
-- (sql/functions/44_preempt.sql)
SELECT rung_worker_drain_requeue($1::bigint, $2, $3);
