-- A delivery failed: row $1 is tried again after $2 ms; $3 the HTTP status (0: no answer), $4 why.
UPDATE webhook_outbox
SET next_attempt_at = now() + make_interval(secs => $2::float8 / 1000), claimed_until = NULL,
    last_status = $3::int, last_error = $4
WHERE id = $1::bigint
