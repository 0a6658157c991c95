-- -> {"workers": [...]}
SELECT jsonb_build_object('workers', coalesce((SELECT jsonb_agg(jsonb_build_object('id', w.id, 'name', w.name,
  'host', w.host, 'state', w.state, 'created_at', w.created_at, 'last_seen_at', w.last_seen_at,
  'gpus', coalesce((SELECT jsonb_agg(g.uuid ORDER BY g.idx) FROM gpus g WHERE g.worker_id = w.id), '[]'),
  'running_attempts', (SELECT count(*) FROM attempts a WHERE a.worker_id = w.id AND a.state = 'running'))
  ORDER BY w.id) FROM workers w), '[]'));
