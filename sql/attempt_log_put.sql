-- POST /v1/attempts/{id}/log (server/api_logs.c): $1 attempt id, $2 token, $3 byte_from, $4 byte_to,
-- $5 body -> (stored, end): whether this chunk was stored, and where the attempt's stored log ends
-- now, from where the worker sends next. A chunk is stored only where the log ends: a resend of a
-- stored chunk (its answer was lost) stores nothing and moves the worker on; one past the end
-- (a gap) stores nothing and moves it back. No row when the fence (id, token, running) fails.
WITH a AS (SELECT id FROM attempts WHERE id = $1::bigint AND token = $2::text AND state = 'running'),
e AS (SELECT coalesce((SELECT l.byte_to FROM attempt_logs l WHERE l.attempt_id = $1::bigint
                       ORDER BY l.byte_from DESC LIMIT 1), 0) AS end_at),
ins AS (INSERT INTO attempt_logs (attempt_id, byte_from, byte_to, body)
        SELECT a.id, $3::bigint, $4::bigint, $5::text FROM a, e WHERE e.end_at = $3::bigint
        ON CONFLICT (attempt_id, byte_from) DO NOTHING RETURNING byte_to)
SELECT EXISTS (SELECT 1 FROM ins), coalesce((SELECT byte_to FROM ins), e.end_at) FROM a, e;
