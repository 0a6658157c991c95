-- $1 worker id, $2 note or NULL, $3 who -> {"changed", "worker", "requeued"} or NULL: drains it
-- (sql/functions/31_drain.sql) and stops its running attempts, each queued again unchanged when it
-- ends (rung_worker_requeue, 44_preempt.sql), in one transaction
SELECT rung_worker_drain($1::bigint, true, $2, $3) || jsonb_build_object('requeued', rung_worker_requeue($1::bigint, $3, $2));
