-- The memory model's data (issue 12): what each ended attempt tells about memory, and the reset
-- times of what rung learned per (arch, GPU memory class). rungd computes an attempt's FEATURES and
-- OBSERVATION in C (recovery/memmodel.c) when it ends and stores them with the finish
-- (sql/functions/62_finish_apply_batch.sql); the CTX and GET /v1/profiles read them back through
-- rung_memory_observations (sql/functions/55_memory.sql).

ALTER TABLE attempts
  ADD COLUMN peak_mib     int,    -- FACTS.peak.mib: the highest memory.used while the trainer ran
  ADD COLUMN peak_phase   text,   -- FACTS.peak.phase
  ADD COLUMN mem_features jsonb,  -- memmodel_features of the attempt's config
  ADD COLUMN mem_arch     text,   -- memmodel_arch of the config
  ADD COLUMN mem_gpu_mib  int,    -- total memory of the attempt's GPU
  ADD COLUMN mem_obs      jsonb;  -- the OBSERVATION, only when it fit or ran out of GPU memory
-- The observations of one arch, newest first (the CTX and the profiles read at most 200).
CREATE INDEX attempts_mem_obs ON attempts (mem_arch, id DESC) WHERE mem_obs IS NOT NULL;

-- One row per (arch, GPU class) that support reset: observations that ended before reset_at no
-- longer count. gpu_class_mib is memmodel_gpu_class: total MiB rounded to the nearest GiB.
CREATE TABLE memory_profiles (
  arch          text NOT NULL,
  gpu_class_mib int NOT NULL CHECK (gpu_class_mib > 0),
  reset_at      timestamptz NOT NULL DEFAULT now(),
  reset_by      text,
  PRIMARY KEY (arch, gpu_class_mib)
);
