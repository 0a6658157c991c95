-- Batch statements find their rows by primary key, whatever the planner's statistics say.
-- jsonb_to_recordset() is estimated at 100 rows, so "these 20 attempts, if still running" was
-- planned as a read of every running attempt through the attempts_one_running partial index,
-- hash-joined with the batch, and a claim round's "these jobs, if still queued" as a read of the
-- whole queue through jobs_claim: each batch cost O(running attempts) or O(queue length) instead
-- of O(batch). (Adding `id = ANY (the batch's ids)` was not enough: with stale statistics the
-- planner still preferred the partial index.) Now each lookup is a LATERAL primary-key probe
-- (OFFSET 0: planned on its own), a state test next to a probe is written `(state = ...) IS TRUE`,
-- which the planner cannot match to a partial index's predicate, and an UPDATE of rows found
-- earlier in the statement also names them as `id = ANY (their ids)`, so that it is a primary-key
-- lookup even when the planner expects a hundred of them. Those lookups are in the functions under
-- sql/functions/; this migration keeps the two indexes below.
--
-- gpus had no index on worker_id: every lease's ownership check counted a worker's GPUs with a
-- scan of the whole fleet, and the CTX's largest usable GPU memory read every GPU once per batch.
CREATE INDEX gpus_worker ON gpus (worker_id);
CREATE INDEX gpus_usable_memory ON gpus (memory_total_mib) WHERE state <> 'quarantined';
