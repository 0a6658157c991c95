-- $1 attempt id, $2 token -> released?
SELECT rung_release($1::bigint, $2);
