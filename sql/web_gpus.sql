-- Web GPUs page -> {"gpus": [GPU + worker_name, worker_state, worker_pool, running_job], "workers": [WORKER],
-- "owners": [{"owner", "queued", "running", "max_running"}], "pools": [POOL]} (rung_worker_json: state,
-- drain, running attempts; rung_owners_summary; rung_pools_json)
SELECT jsonb_build_object('gpus', coalesce((SELECT jsonb_agg(rung_gpu_json(g) || jsonb_build_object(
    'worker_name', w.name, 'worker_state', w.state, 'worker_pool', w.pool,
    'running_job', (SELECT a.job_id FROM attempts a WHERE a.gpu_uuid = g.uuid AND a.state = 'running' LIMIT 1))
    ORDER BY g.worker_id, g.idx, g.uuid)
  FROM gpus g LEFT JOIN workers w ON w.id = g.worker_id), '[]'),
  'workers', coalesce((SELECT jsonb_agg(rung_worker_json(w) ORDER BY w.id) FROM workers w), '[]'),
  'owners', rung_owners_summary(), 'pools', rung_pools_json());
