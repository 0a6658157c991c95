-- $1 worker id, $2 token id or NULL (admin) -> owned?, GPU count (no row when missing)
SELECT $2::bigint IS NULL OR coalesce(w.token_id = $2::bigint, false),
       (SELECT count(*) FROM gpus g WHERE g.worker_id = w.id)
FROM workers w WHERE w.id = $1::bigint;
