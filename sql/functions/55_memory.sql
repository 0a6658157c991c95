-- The memory model's readers (issue 12, migrations/014_memory.sql): the arch of a config as
-- memmodel_arch computes it, and the stored OBSERVATIONs of an (arch, GPU class) for the CTX,
-- GET /v1/profiles and GET /v1/jobs/{id}/memory.
-- memmodel_arch in SQL (the CTX must pick the arch before rungd has the config): model.arch of the
-- first process without a ":tag" suffix, else the legacy flags is_flux / is_xl / is_v3, else
-- "unknown". it_memory checks the two agree.
CREATE OR REPLACE FUNCTION rung_config_arch(c jsonb) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT split_part(CASE WHEN jsonb_typeof(m->'arch') = 'string' AND m->>'arch' <> '' THEN m->>'arch'
                         WHEN jsonb_typeof(m->'arch') = 'string' THEN 'unknown'
                         WHEN m->'is_flux' = 'true'::jsonb THEN 'flux'
                         WHEN m->'is_xl' = 'true'::jsonb THEN 'sdxl'
                         WHEN m->'is_v3' = 'true'::jsonb THEN 'sd3'
                         ELSE 'unknown' END, ':', 1)
  FROM (SELECT c #> '{config,process,0,model}' AS m) s
$$;

-- The OBSERVATIONs of ARCH on GPUs of the same memory class as GPU_MIB (total within ±10 %), newest
-- first, at most 200, plus every one of job P_JOB (NULL: none); only those that ended after the
-- reset of (ARCH, class of GPU_MIB). Each carries "at" (when it ended). [] when GPU_MIB is NULL.
CREATE OR REPLACE FUNCTION rung_memory_observations(p_arch text, p_gpu_mib int, p_job bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  WITH r AS (SELECT coalesce((SELECT m.reset_at FROM memory_profiles m
                              WHERE m.arch = p_arch AND m.gpu_class_mib = ((p_gpu_mib + 512) / 1024) * 1024),
                             '-infinity') AS t),
  o AS ((SELECT a.id, a.mem_obs, a.ended_at FROM attempts a, r
         WHERE a.mem_arch = p_arch AND a.mem_obs IS NOT NULL AND a.ended_at > r.t
           AND abs(a.mem_gpu_mib::bigint - p_gpu_mib) * 100 <= p_gpu_mib::bigint * 10
         ORDER BY a.mem_arch, a.id DESC LIMIT 200)
        UNION
        SELECT a.id, a.mem_obs, a.ended_at FROM attempts a, r
        WHERE a.job_id = p_job AND a.mem_obs IS NOT NULL AND a.ended_at > r.t)
  SELECT coalesce(jsonb_agg(o.mem_obs || jsonb_build_object('at', o.ended_at) ORDER BY o.id DESC), '[]')
  FROM o WHERE p_gpu_mib IS NOT NULL
$$;
