-- A delivery was answered 2xx: row $1, HTTP status $2.
UPDATE webhook_outbox SET delivered_at = now(), claimed_until = NULL, last_status = $2::int, last_error = NULL
WHERE id = $1::bigint
