-- $1 attempt id, $2 token id -> leased to a worker bound to that token?, that worker's id (no row
-- when missing; the id lets rungd forget the answer when that worker registers again)
SELECT coalesce(w.token_id = $2::bigint, false), a.worker_id
FROM attempts a LEFT JOIN workers w ON w.id = a.worker_id WHERE a.id = $1::bigint;
