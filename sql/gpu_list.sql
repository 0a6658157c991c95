-- -> {"gpus": [...]}
SELECT jsonb_build_object('gpus', coalesce((SELECT jsonb_agg(rung_gpu_json(g) ORDER BY g.worker_id, g.idx, g.uuid) FROM gpus g), '[]'));
