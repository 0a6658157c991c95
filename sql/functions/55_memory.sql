-- The memory model's readers (issue 12, migrations/014_memory.sql): the arch of a config as
-- memmodel_arch computes it, the attempts whose OBSERVATION still counts (memory_observations), and
-- the OBSERVATIONs of an (arch, GPU class) for the CTX, GET /v1/profiles and GET /v1/jobs/{id}/memory.
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

-- The attempts whose OBSERVATION still counts: one was stored (mem_obs) and the attempt ended after
-- the last reset of (its arch, its own GPU's memory class: mem_gpu_mib rounded to the nearest GiB),
-- so a reset drops what was learned on that class and nothing else. The one place that rule is
-- written; a plain view, so the planner inlines it into each reader below and a reader filtering on
-- mem_arch and ordering by (mem_arch, id DESC) can still walk attempts_mem_obs (checked with EXPLAIN,
-- docs/DESIGN.md).
CREATE OR REPLACE VIEW memory_observations AS
  SELECT a.id, a.job_id, a.mem_arch, a.mem_obs, a.ended_at
  FROM attempts a
  LEFT JOIN memory_profiles m ON m.arch = a.mem_arch AND m.gpu_class_mib = ((a.mem_gpu_mib + 512) / 1024) * 1024
  WHERE a.mem_obs IS NOT NULL AND a.ended_at > coalesce(m.reset_at, '-infinity');

-- The OBSERVATIONs of ARCH on GPUs of every memory class (what a config needs does not depend on
-- the card: recovery/memmodel.h), newest first, at most 200, plus every one of job P_JOB (NULL:
-- none); each only while it counts (memory_observations: a reset of its own GPU's class drops it).
-- Each carries "at" (when it ended). [] when GPU_MIB is NULL (the
-- profile's class: kept in the signature, the fit judges against it).
CREATE OR REPLACE FUNCTION rung_memory_observations(p_arch text, p_gpu_mib int, p_job bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  WITH o AS ((SELECT v.id, v.mem_obs, v.ended_at FROM memory_observations v
              WHERE v.mem_arch = p_arch ORDER BY v.mem_arch, v.id DESC LIMIT 200)
             UNION
             SELECT v.id, v.mem_obs, v.ended_at FROM memory_observations v WHERE v.job_id = p_job)
  SELECT coalesce(jsonb_agg(o.mem_obs || jsonb_build_object('at', o.ended_at) ORDER BY o.id DESC), '[]')
  FROM o WHERE p_gpu_mib IS NOT NULL
$$;

-- The CTX's share of rung_memory_observations (issue 12, finish cost): every observation of job
-- P_JOB and the newest of P_ARCH (every class, each while it counts) up to 48 in all, newest
-- first, compact: no "at", no null figures, and FEATURES without the false or 0 settings memmodel
-- reads as their default anyway (grad_ckpt is kept: it defaults to on). The policy refits on these
-- at each finish; 200 full observations were ~90 KB of CTX, 48 compact ones are under a sixth of that.
CREATE OR REPLACE FUNCTION rung_memory_ctx_observations(p_arch text, p_gpu_mib int, p_job bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  WITH o AS ((SELECT v.id, v.mem_obs, false AS own FROM memory_observations v
              WHERE v.mem_arch = p_arch ORDER BY v.mem_arch, v.id DESC LIMIT 48)
             UNION ALL
             SELECT v.id, v.mem_obs, true FROM memory_observations v WHERE v.job_id = p_job),
  k AS (SELECT DISTINCT ON (o.id) o.id, o.mem_obs, o.own FROM o ORDER BY o.id, o.own DESC),
  s AS (SELECT k.id, k.mem_obs FROM k ORDER BY k.own DESC, k.id DESC LIMIT 48)
  SELECT coalesce(jsonb_agg(jsonb_strip_nulls(s.mem_obs - 'at') ||
                            jsonb_build_object('features', (
                              SELECT coalesce(jsonb_object_agg(e.key, e.value), '{}') FROM jsonb_each(s.mem_obs->'features') e
                              WHERE e.key = 'grad_ckpt' OR e.value NOT IN ('false'::jsonb, '0'::jsonb)))
                            ORDER BY s.id DESC), '[]')
  FROM s WHERE p_gpu_mib IS NOT NULL
$$;
