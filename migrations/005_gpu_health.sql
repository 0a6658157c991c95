-- GPU health reports: a worker runs a health check on a GPU that is not `ok` and reports it
-- (POST /v1/gpus/{uuid}/health). A passing report lifts a quarantine to `suspect` once the GPU has
-- been quarantined for the minimum time, and clears a suspect GPU with no env fault in its window
-- to `ok`; a failing one only records. The columns here; the trigger stamping quarantined_at and the
-- functions in sql/functions/85_gpus.sql.

ALTER TABLE gpus
  ADD COLUMN quarantined_at timestamptz,   -- when it last became quarantined
  ADD COLUMN health_at      timestamptz,   -- last health report
  ADD COLUMN health_passed  boolean,
  ADD COLUMN health_detail  text;
UPDATE gpus SET quarantined_at = updated_at WHERE state = 'quarantined';
