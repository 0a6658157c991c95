-- $1 attempt id, $2 token id -> leased to a worker bound to that token? (no row when missing)
SELECT coalesce(w.token_id = $2::bigint, false)
FROM attempts a LEFT JOIN workers w ON w.id = a.worker_id WHERE a.id = $1::bigint;
