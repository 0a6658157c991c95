-- $1 job id, $2 GPU MiB or NULL (then the GPU of the job's latest attempt) -> {"job_id", "kind",
-- "arch", "config" (the current one), "gpu_mib", "observations"} (no row when the job is missing);
-- rungd fits the profile and predicts the config's peak.
SELECT jsonb_build_object('job_id', j.id, 'kind', j.kind, 'arch', rung_config_arch(j.target_config),
                          'config', coalesce(j.current_config, j.target_config), 'gpu_mib', gm.m,
                          'observations', rung_memory_observations(rung_config_arch(j.target_config), gm.m, j.id))
FROM jobs j
CROSS JOIN LATERAL (
  SELECT coalesce($2::int, (SELECT g.memory_total_mib FROM attempts a JOIN gpus g ON g.uuid = a.gpu_uuid
                            WHERE a.job_id = j.id ORDER BY a.number DESC LIMIT 1)) AS m) gm
WHERE j.id = $1::bigint;
