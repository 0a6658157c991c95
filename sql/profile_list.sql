-- $1 arch or NULL (all) -> [{"arch", "gpu_class_mib", "reset_at", "reset_by", "observations"}]: one
-- entry per (arch, GPU class) that has observations or was reset, by arch and class; rungd fits
-- each (memmodel_fit). The class of an observation is memmodel_gpu_class of its GPU.
WITH k AS (
  SELECT DISTINCT a.mem_arch AS arch, ((a.mem_gpu_mib + 512) / 1024) * 1024 AS cls
  FROM attempts a WHERE a.mem_obs IS NOT NULL AND a.mem_gpu_mib > 0 AND ($1::text IS NULL OR a.mem_arch = $1::text)
  UNION
  SELECT m.arch, m.gpu_class_mib FROM memory_profiles m WHERE $1::text IS NULL OR m.arch = $1::text)
SELECT coalesce(jsonb_agg(jsonb_build_object(
         'arch', k.arch, 'gpu_class_mib', k.cls, 'reset_at', m.reset_at, 'reset_by', m.reset_by,
         'observations', rung_memory_observations(k.arch, k.cls, NULL)) ORDER BY k.arch, k.cls), '[]')
FROM k LEFT JOIN memory_profiles m ON m.arch = k.arch AND m.gpu_class_mib = k.cls;
