-- -> {"workers": [WORKER]} (rung_worker_json, sql/functions/31_drain.sql)
SELECT jsonb_build_object('workers', coalesce((SELECT jsonb_agg(rung_worker_json(w) ORDER BY w.id) FROM workers w), '[]'));
