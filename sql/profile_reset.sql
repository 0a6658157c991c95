-- $1 arch, $2 GPU class MiB, $3 who, $4 note (why, or NULL) -> {"arch", "gpu_class_mib", "reset_at",
-- "reset_by", "note"}, or no row when rung knows nothing of that profile (no observation of the arch
-- in the class, never reset). Observations made on the class that ended before reset_at no longer
-- count; an event profile_reset records it with the note.
WITH k AS (SELECT $1::text AS arch, $2::int AS cls),
known AS (
  SELECT k.* FROM k
  WHERE EXISTS (SELECT 1 FROM attempts a WHERE a.mem_arch = k.arch AND a.mem_obs IS NOT NULL
                  AND abs(a.mem_gpu_mib::bigint - k.cls) * 100 <= k.cls::bigint * 10)
     OR EXISTS (SELECT 1 FROM memory_profiles m WHERE m.arch = k.arch AND m.gpu_class_mib = k.cls)),
up AS (
  INSERT INTO memory_profiles (arch, gpu_class_mib, reset_at, reset_by)
  SELECT known.arch, known.cls, now(), $3::text FROM known
  ON CONFLICT (arch, gpu_class_mib) DO UPDATE SET reset_at = now(), reset_by = excluded.reset_by
  RETURNING *),
ev AS (
  INSERT INTO events (kind, reason, data)
  SELECT 'profile_reset', 'memory profile reset by ' || coalesce(up.reset_by, '?') || coalesce(': ' || $4::text, ''),
         jsonb_build_object('arch', up.arch, 'gpu_class_mib', up.gpu_class_mib, 'note', $4::text)
  FROM up)
SELECT jsonb_build_object('arch', up.arch, 'gpu_class_mib', up.gpu_class_mib, 'reset_at', up.reset_at,
                          'reset_by', up.reset_by, 'note', $4::text)
FROM up;
