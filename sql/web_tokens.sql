-- Web tokens page (admins) -> {"tokens": [TOKEN + running]} oldest first, never the hashes; running:
-- how many of the token's jobs run now (rung_owner_running, what its max_running counts)
SELECT jsonb_build_object('tokens', coalesce((SELECT jsonb_agg(rung_token_json(t) || jsonb_build_object(
    'running', rung_owner_running(t.name)) ORDER BY t.id) FROM tokens t), '[]'));
