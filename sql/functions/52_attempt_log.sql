-- A chunk of an attempt's trainer output (migration 022; POST /v1/attempts/{id}/log, server/api_logs.c):
-- bytes [P_FROM, P_TO) of the worker's trainer.log as P_BODY. Returns (stored, end_at): whether it
-- was stored, and where the attempt's stored log ends now, from where the worker sends next. A chunk
-- is stored only where the log ends: a resend of a stored chunk (its answer was lost) stores nothing
-- and moves the worker on; one past the end (a gap) stores nothing and moves it back. No row when the
-- fence (id, token, running) fails. Two probes of primary keys and one insert; `make bench`'s logs
-- scenario times it beside a bare insert of the same row. plpgsql so that a session plans the
-- statement once (an sql function's body is planned again at every call: 0.45x the bare insert).
CREATE OR REPLACE FUNCTION rung_log_put(p_attempt bigint, p_token text, p_from bigint, p_to bigint, p_body text)
RETURNS TABLE (stored boolean, end_at bigint) LANGUAGE plpgsql AS $$
BEGIN
  RETURN QUERY WITH a AS (SELECT id FROM attempts WHERE id = p_attempt AND token = p_token AND state = 'running'),
  e AS (SELECT coalesce((SELECT l.byte_to FROM attempt_logs l WHERE l.attempt_id = p_attempt
                         ORDER BY l.byte_from DESC LIMIT 1), 0) AS end_at),
  ins AS (INSERT INTO attempt_logs (attempt_id, byte_from, byte_to, body)
          SELECT a.id, p_from, p_to, p_body FROM a, e WHERE e.end_at = p_from
          ON CONFLICT (attempt_id, byte_from) DO NOTHING RETURNING byte_to)
  SELECT EXISTS (SELECT 1 FROM ins), coalesce((SELECT i.byte_to FROM ins i), e.end_at) FROM a, e;
END $$;
