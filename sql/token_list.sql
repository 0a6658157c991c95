-- -> {"tokens": [...]} oldest first, never the hashes
SELECT jsonb_build_object('tokens', coalesce((SELECT jsonb_agg(rung_token_json(t) ORDER BY t.id) FROM tokens t), '[]'));
